// Nadaraya-Watson attention pooling (Nadaraya 1964, Watson 1964; d2l 10.2, "Attention Pooling:
// Nadaraya-Watson Kernel Regression"): predict y at a query x as a softmax-weighted average of
// training targets, the weights coming from how close x is to each training input (the keys).
//   non-parametric:  f(x) = sum_i softmax(-(x - x_i)^2 / 2) y_i
//   parametric:      f(x) = sum_i softmax(-((x - x_i) w)^2 / 2) y_i,  w learned by SGD
// Trains w on noisy samples of y = 2 sin(x) + x^0.8 and prints the falling loss and the fit
// error of both estimators on a clean test grid.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "examples/common/cli.h"
#include "examples/common/plot.h"
#include "examples/common/progress.h"
#include "nabla/nabla.h"

using namespace nabla;

namespace {

double truth(double x) { return 2 * std::sin(x) + std::pow(x, 0.8); }

// softmax over the last dim of non-positive scores (so exp cannot overflow).
Tensor softmax_last(const Tensor& scores) {
  Tensor e = exp(scores);
  return div(e, sum(e, {-1}, true));
}

// queries (Q,), keys (Q, K), values (Q, K) -> predictions (Q,)
Tensor pool(const Tensor& queries, const Tensor& keys, const Tensor& values, const Tensor& w) {
  Tensor diff = sub(queries.unsqueeze(1), keys);  // (Q, K)
  Tensor scaled = w.defined() ? mul(diff, w) : diff;
  Tensor attention = softmax_last(mul(mul(scaled, scaled), -0.5));
  return sum(mul(attention, values), {-1});
}

// d2l's toy data: training inputs sorted uniform samples on [0, 5), targets with N(0, 0.5^2)
// noise; a clean test grid 0, 0.1, 0.2, ...
struct ToyData {
  std::vector<double> xs, ys, test_x, test_y;
};

ToyData make_data(uint64_t seed, int64_t n_train, int64_t n_test) {
  Generator gen(seed);
  ToyData d;
  d.xs = rand({n_train}, gen, kFloat64).to_vector<double>();
  for (double& x : d.xs) x *= 5;
  std::sort(d.xs.begin(), d.xs.end());
  const std::vector<double> noise = randn({n_train}, gen, kFloat64).to_vector<double>();
  d.ys.resize(d.xs.size());
  for (size_t i = 0; i < d.xs.size(); ++i) d.ys[i] = truth(d.xs[i]) + 0.5 * noise[i];
  for (int64_t i = 0; i < n_test; ++i) {
    d.test_x.push_back(0.1 * static_cast<double>(i));
    d.test_y.push_back(truth(d.test_x.back()));
  }
  return d;
}

// The two fits against the truth (fit.png), and the parametric attention matrix (attention.png;
// rows: test queries, columns: training keys sorted by x; a sharp diagonal = local averaging).
void save_figures(const std::string& out_dir, const ToyData& d,
                  const std::vector<double>& fit_nonparametric,
                  const std::vector<double>& fit_parametric, const Tensor& w) {
  viz::Series truth_s{"truth", d.test_x, d.test_y, viz::kPalette[0]};
  viz::Series np_s{"non-parametric", d.test_x, fit_nonparametric, viz::kPalette[1]};
  viz::Series p_s{"parametric", d.test_x, fit_parametric, viz::kPalette[2]};
  viz::Series data_s{"training data", d.xs, d.ys, viz::kPalette[3], true};
  data_s.color = {150, 150, 150};
  data_s.lines = false;
  viz::line_plot(out_dir + "/fit.png", {truth_s, np_s, p_s, data_s},
                 {"Nadaraya-Watson attention pooling", "x", "y"});
  NoGradGuard no_grad;
  const auto n_test = static_cast<int64_t>(d.test_x.size()),
             n_train = static_cast<int64_t>(d.xs.size());
  const Tensor x_test = from_vector(d.test_x, {n_test}), x_train = from_vector(d.xs, {n_train});
  Tensor diff = mul(sub(x_test.unsqueeze(1), x_train.expand({n_test, n_train})), w);
  Tensor attn = softmax_last(mul(mul(diff, diff), -0.5));
  viz::heatmap(out_dir + "/attention.png",
               viz::matrix_rows(attn.to_vector<double>(), d.test_x.size(), d.xs.size()),
               {.title = "parametric attention weights",
                .xlabel = "training key (sorted by x)",
                .ylabel = "test query (x = 0 to 4.9)"});
}

}  // namespace

int run(int argc, char** argv) {
  examples::CommandLine cli{"Nadaraya-Watson attention pooling (non-parametric vs parametric)"};
  int epochs = 5;
  double lr = 0.5;
  uint64_t seed = 2026;
  std::string out_dir = "runs/attention_pooling";
  cli.option("--epochs", epochs, "SGD epochs for the parametric width w");
  cli.option("--lr", lr, "learning rate");
  cli.option("--seed", seed, "data seed");
  cli.option("--out", out_dir, "directory for the PNG figures");
  if (auto exit_code = cli.parse(argc, argv)) return *exit_code;
  std::filesystem::create_directories(out_dir);

  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n_train = 50, n_test = 50;
  const ToyData d = make_data(seed, n_train, n_test);
  Tensor x_train = from_vector(d.xs, {n_train}), y_train = from_vector(d.ys, {n_train});
  Tensor x_test = from_vector(d.test_x, {n_test}), y_test = from_vector(d.test_y, {n_test});

  // Training pairs: each training point queries all the *other* points (leave-one-out).
  std::vector<double> keys, values;
  for (int64_t i = 0; i < n_train; ++i)
    for (int64_t j = 0; j < n_train; ++j)
      if (i != j) {
        keys.push_back(d.xs[static_cast<size_t>(j)]);
        values.push_back(d.ys[static_cast<size_t>(j)]);
      }
  Tensor k_train = from_vector(keys, {n_train, n_train - 1});
  Tensor v_train = from_vector(values, {n_train, n_train - 1});

  auto predict = [&](const Tensor& w) {
    NoGradGuard no_grad;
    return pool(x_test, x_train.expand({n_test, n_train}), y_train.expand({n_test, n_train}), w);
  };
  auto test_mse = [&](const Tensor& w) { return mean(pow(sub(predict(w), y_test), 2.0)).item(); };
  const double mse_nonparametric = test_mse(Tensor());

  // Full-batch gradient descent on the kernel width w, the update written out.
  Tensor w = ones({1}, kFloat64).requires_grad_();
  double loss_first = 0, loss_last = 0;
  fmt::print("Nadaraya-Watson attention pooling: {} training points, parametric width w\n",
             n_train);
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    Tensor pred = pool(x_train, k_train, v_train, w);
    Tensor loss = mul(sum(pow(sub(pred, y_train), 2.0)), 0.5);
    w.set_grad(Tensor());
    loss.backward();
    {
      NoGradGuard no_grad;
      sub_(w, mul(w.grad(), lr / static_cast<double>(n_train)));
    }
    double l = loss.item() / static_cast<double>(n_train);
    if (epoch == 1) loss_first = l;
    loss_last = l;
    fmt::print("epoch {}  loss {:.6f}  w {:.4f}\n", epoch, l, w.item());
  }
  const double mse_parametric = test_mse(w.detach());
  const double seconds = examples::seconds_since(t0);
  fmt::print("test MSE against the clean curve: non-parametric {:.4f}, parametric {:.4f}\n",
             mse_nonparametric, mse_parametric);

  save_figures(out_dir, d, predict(Tensor()).to_vector<double>(),
               predict(w.detach()).to_vector<double>(), w.detach());
  fmt::print("wrote {}/fit.png and {}/attention.png\n", out_dir, out_dir);
  fmt::print(
      "RESULT example=attention_pooling loss_first={:.6f} loss_last={:.6f} w={:.4f} "
      "test_mse_nonparametric={:.6f} test_mse_parametric={:.6f} train_s={:.3f}\n",
      loss_first, loss_last, w.item(), mse_nonparametric, mse_parametric, seconds);
  return loss_last < loss_first ? 0 : 1;
}

int main(int argc, char** argv) { return nabla::examples::guarded_main(argc, argv, run); }
