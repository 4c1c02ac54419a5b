// Adam/AdamW's one-pass step over all parameters (optim/multi_tensor.h): bitwise the per-element
// formula of optim/adam.cpp, written here as a plain loop, one parameter and one element at a
// time. Parameter sizes include 0 and 1 and one large enough to be split across threads.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "nabla/optim/multi_tensor.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using namespace nabla::optim;

namespace {

struct Config {
  const char* name;
  bool decoupled, amsgrad;
  double weight_decay;
};

// One parameter's reference state, as the per-element formula keeps it.
template <class T>
struct Reference {
  std::vector<T> p, m, v, vmax;
  int64_t step = 0;
};

template <class T>
void reference_step(Reference<T>& r, const std::vector<T>& grad, const Config& cfg, double lr,
                    double beta1, double beta2, double eps) {
  const auto t = static_cast<double>(++r.step);
  const double step_size = lr / (1 - std::pow(beta1, t));
  const double bc2_sqrt_d = std::sqrt(1 - std::pow(beta2, t));
  const T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2);
  const T one_minus_b1 = static_cast<T>(1 - beta1), one_minus_b2 = static_cast<T>(1 - beta2);
  const T wd = static_cast<T>(cfg.weight_decay);
  const T decay = static_cast<T>(1 - lr * cfg.weight_decay);
  const T bc2_sqrt = static_cast<T>(bc2_sqrt_d), eps_t = static_cast<T>(eps);
  const T neg_step = static_cast<T>(-step_size);
  for (size_t i = 0; i < r.p.size(); ++i) {
    T g = grad[i];
    if (cfg.decoupled) {
      r.p[i] = r.p[i] * decay;
    } else if (cfg.weight_decay != 0) {
      g = g + wd * r.p[i];
    }
    r.m[i] = r.m[i] * b1 + one_minus_b1 * g;
    r.v[i] = r.v[i] * b2 + one_minus_b2 * g * g;
    T vi = r.v[i];
    if (cfg.amsgrad) vi = r.vmax[i] = std::max(r.vmax[i], r.v[i]);
    const T denom = std::sqrt(vi) / bc2_sqrt + eps_t;
    r.p[i] = r.p[i] + neg_step * r.m[i] / denom;
  }
}

template <class T>
void check_bitwise_equal(const Tensor& t, const std::vector<T>& expected, const char* what) {
  INFO(what << " of shape " << shape_str(t.shape()));
  CHECK(t.to_vector<T>() == expected);
}

template <class T>
void check_one_pass_matches_formula(const Config& cfg, DType dt) {
  INFO(cfg.name << " " << dtype_name(dt));
  // 0, 1, odd sizes, and 70 x 1000: the total (> 2^16 elements) is split across threads, with
  // the split inside a parameter.
  const std::vector<Shape> shapes = {{0}, {1}, {7}, {3, 11}, {4099}, {70, 1000}, {0, 3}};
  Generator gen(11);
  std::vector<Tensor> params;
  std::vector<Reference<T>> refs;
  for (const Shape& s : shapes) {
    Tensor p = randn(s, gen, dt).requires_grad_();
    params.push_back(p);
    Reference<T> r;
    r.p = p.to_vector<T>();
    r.m.assign(r.p.size(), T(0));
    r.v = r.m;
    r.vmax = r.m;
    refs.push_back(r);
  }
  const double lr = 0.01, beta1 = 0.8, beta2 = 0.95, eps = 1e-6;
  const AdamOptions opts{lr, beta1, beta2, eps, cfg.weight_decay, cfg.amsgrad};
  const AdamWOptions wopts{lr, beta1, beta2, eps, cfg.weight_decay, cfg.amsgrad};
  std::unique_ptr<Adam> opt =
      cfg.decoupled ? std::make_unique<AdamW>(params, wopts) : std::make_unique<Adam>(params, opts);
  for (int step = 0; step < 4; ++step) {
    for (size_t k = 0; k < params.size(); ++k) {
      // Parameter 2 has no gradient in step 1: its step count falls behind the others'.
      if (step == 1 && k == 2) {
        params[k].set_grad(Tensor());
        continue;
      }
      // Large gradients now and then, so that amsgrad's max keeps an old v.
      Tensor g = mul(randn(shapes[k], gen, dt), step == 2 ? 0.1 : 3.0);
      params[k].set_grad(g);
      reference_step(refs[k], g.to_vector<T>(), cfg, lr, beta1, beta2, eps);
    }
    opt->step();
  }
  for (size_t k = 0; k < params.size(); ++k) {
    INFO("parameter " << k);
    const ParamState& st = opt->state(k);
    check_bitwise_equal(params[k], refs[k].p, "param");
    check_bitwise_equal(st.at("exp_avg"), refs[k].m, "exp_avg");
    check_bitwise_equal(st.at("exp_avg_sq"), refs[k].v, "exp_avg_sq");
    if (cfg.amsgrad) check_bitwise_equal(st.at("max_exp_avg_sq"), refs[k].vmax, "max_exp_avg_sq");
    CHECK(st.count("max_exp_avg_sq") == (cfg.amsgrad ? 1u : 0u));
    CHECK(st.at("step").item<int64_t>() == refs[k].step);
  }
}

}  // namespace

TEST_CASE("Adam/AdamW one-pass step equals the per-element formula bitwise", "[optim]") {
  const std::vector<Config> configs = {
      {"Adam", false, false, 0.0},
      {"Adam + L2 weight decay", false, false, 0.1},
      {"Adam + amsgrad + L2 weight decay", false, true, 0.1},
      {"AdamW", true, false, 0.05},
      {"AdamW + amsgrad", true, true, 0.05},
      {"AdamW without weight decay", true, false, 0.0},
  };
  for (const Config& cfg : configs) {
    check_one_pass_matches_formula<float>(cfg, kFloat32);
    check_one_pass_matches_formula<double>(cfg, kFloat64);
  }
}

TEST_CASE("Adam: a group of float32 and float64 parameters updates both", "[optim]") {
  Tensor a = ones({3}, kFloat32).requires_grad_(), b = ones({2}, kFloat64).requires_grad_();
  AdamW opt({a, b}, {.lr = 0.1});
  a.set_grad(ones({3}, kFloat32));
  b.set_grad(ones({2}, kFloat64));
  opt.step();
  // Step 1: the decay 1 - lr * 0.01, then m / (sqrt(v) / sqrt(1 - beta2) + eps) = 0.1 / (1 + eps).
  const double expected = 0.999 - 0.1 / (1 + 1e-8);
  for (float x : a.to_vector<float>()) CHECK(x == Approx(expected).epsilon(1e-6));
  for (double x : b.to_vector<double>()) CHECK(x == Approx(expected).epsilon(1e-12));
}

TEST_CASE("parallel_for_segments visits every element of every segment once", "[optim]") {
  for (std::vector<int64_t> sizes :
       {std::vector<int64_t>{0, 5, 0, 0, 100000, 1, 0, 3}, std::vector<int64_t>{0},
        std::vector<int64_t>{}, std::vector<int64_t>{40000, 40000}}) {
    std::vector<std::vector<int>> seen;
    for (int64_t n : sizes) seen.emplace_back(static_cast<size_t>(n), 0);
    parallel_for_segments(sizes, 16, [&](size_t k, int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) ++seen[k][static_cast<size_t>(i)];
    });
    bool once = true;
    for (const auto& s : seen)
      for (int c : s) once = once && c == 1;
    CHECK(once);
  }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
