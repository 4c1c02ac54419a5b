// Why does scaled dot-product attention divide by sqrt(d_k)? The argument of Vaswani et al. 2017,
// "Attention Is All You Need", section 3.2.1 and its footnote 4 (also d2l 10.3.2), measured.
// With q, k ~ N(0, I) in d_k dims, q.k has variance d_k. Unscaled, the logits grow with d_k, the
// softmax saturates (one weight near 1) and the gradient flowing back through it vanishes.
// Scaled by 1/sqrt(d_k), the variance stays 1 and the gradient stays healthy.
// For each d_k this prints: var(q.k), the mean largest softmax weight, and the mean norm of the
// gradient of the attention weights' projection with respect to the logits, scaled vs unscaled.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "examples/common/cli.h"
#include "examples/common/plot.h"
#include "examples/common/progress.h"
#include "nabla/nabla.h"

using namespace nabla;

namespace {

struct Stats {
  double logit_var, max_weight, grad_norm;
};

// queries (N, d), keys (N, K, d): one query against K keys, N independent trials.
Stats measure(const Tensor& q, const Tensor& k, double scale, Generator& gen) {
  Tensor logits = mul(matmul(k, q.unsqueeze(-1)).squeeze(-1), scale).detach().requires_grad_();
  Tensor weights = softmax(logits, -1);  // (N, K)
  // A random upstream gradient (as if from a loss), the same for both variants.
  Tensor upstream = randn(weights.shape(), gen);
  auto grads = autograd::grad({weights}, {logits}, {upstream});
  NoGradGuard no_grad;
  Stats s;
  s.logit_var = var(logits.detach()).item();
  s.max_weight = mean(max(weights.detach(), -1).values).item();
  s.grad_norm = mean(norm(grads[0], 2.0, {-1})).item();
  return s;
}

}  // namespace

int run(int argc, char** argv) {
  examples::CommandLine cli{"d_k scaling experiment: scaled vs unscaled dot-product attention"};
  int64_t trials = 2000, keys = 32;
  uint64_t seed = 7;
  std::string out_dir = "runs/scaling_experiment";
  cli.option("--trials", trials, "independent queries per d_k");
  cli.option("--keys", keys, "keys per query");
  cli.option("--seed", seed, "random seed");
  cli.option("--out", out_dir, "directory for the PNG plot");
  if (auto exit_code = cli.parse(argc, argv)) return *exit_code;
  std::filesystem::create_directories(out_dir);
  const auto t0 = std::chrono::steady_clock::now();

  const std::vector<int64_t> dims = {2, 8, 32, 128, 512, 2048};
  Generator gen(seed);
  std::vector<double> xs, var_u, var_s, max_u, max_s, grad_u, grad_s;
  fmt::print("{:>6} | {:>10} {:>10} | {:>9} {:>9} | {:>11} {:>11}\n", "d_k", "var q.k",
             "var scaled", "max w", "max w sc.", "|grad|", "|grad| sc.");
  fmt::print("{:-<80}\n", "");
  for (int64_t d : dims) {
    Tensor q = randn({trials, d}, gen), k = randn({trials, keys, d}, gen);
    Stats u = measure(q, k, 1.0, gen);
    Stats s = measure(q, k, 1.0 / std::sqrt(static_cast<double>(d)), gen);
    fmt::print("{:>6} | {:>10.2f} {:>10.3f} | {:>9.4f} {:>9.4f} | {:>11.3e} {:>11.3e}\n", d,
               u.logit_var, s.logit_var, u.max_weight, s.max_weight, u.grad_norm, s.grad_norm);
    xs.push_back(static_cast<double>(d));
    var_u.push_back(u.logit_var);
    var_s.push_back(s.logit_var);
    max_u.push_back(u.max_weight);
    max_s.push_back(s.max_weight);
    grad_u.push_back(u.grad_norm);
    grad_s.push_back(s.grad_norm);
  }
  fmt::print(
      "\nUnscaled, var(q.k) grows like d_k, the largest weight tends to 1 and the gradient\n"
      "through softmax collapses; scaled by 1/sqrt(d_k) all three stay flat.\n");

  viz::PlotOptions opts{"d_k scaling: gradient through softmax", "d_k", "mean |d loss / d logits|"};
  opts.log_x = opts.log_y = true;
  viz::line_plot(out_dir + "/grad_norm.png",
                 {{"unscaled", xs, grad_u, viz::kPalette[3], true},
                  {"scaled 1/sqrt(d_k)", xs, grad_s, viz::kPalette[0], true}},
                 opts);
  viz::PlotOptions opts2{"d_k scaling: largest attention weight", "d_k", "mean max weight"};
  opts2.log_x = true;
  viz::line_plot(out_dir + "/max_weight.png",
                 {{"unscaled", xs, max_u, viz::kPalette[3], true},
                  {"scaled 1/sqrt(d_k)", xs, max_s, viz::kPalette[0], true}},
                 opts2);
  fmt::print("wrote {}/grad_norm.png and {}/max_weight.png\n", out_dir, out_dir);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print(
      "RESULT example=scaling_experiment var_unscaled_d2048={:.1f} var_scaled_d2048={:.3f} "
      "max_weight_unscaled_d2048={:.4f} max_weight_scaled_d2048={:.4f} "
      "grad_norm_unscaled_d2048={:.3e} grad_norm_scaled_d2048={:.3e} train_s={:.3f}\n",
      var_u.back(), var_s.back(), max_u.back(), max_s.back(), grad_u.back(), grad_s.back(), secs);
  return 0;
}

int main(int argc, char** argv) { return nabla::examples::guarded_main(argc, argv, run); }
