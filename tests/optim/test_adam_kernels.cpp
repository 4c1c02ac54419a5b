// Adam/AdamW: the tuned one-pass step (optim/kernels/adam.cpp) against the reference
// per-parameter loop (optim/adam.cpp). Both compute the same formula in the same order (and are
// built with -ffp-contract=off), so parameters and state must agree bit for bit, float32 and
// float64, for parameters of 0 and 1 elements and ones split across threads.
#include <memory>

#include "tests/ops/kernel_compare.h"

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

std::unique_ptr<Adam> make_optimizer(const Config& cfg, const std::vector<Tensor>& params) {
  const double lr = 0.01, beta1 = 0.8, beta2 = 0.95, eps = 1e-6;
  if (cfg.decoupled)
    return std::make_unique<AdamW>(
        params, AdamWOptions{lr, beta1, beta2, eps, cfg.weight_decay, cfg.amsgrad});
  return std::make_unique<Adam>(params,
                                AdamOptions{lr, beta1, beta2, eps, cfg.weight_decay, cfg.amsgrad});
}

void check_kernels_agree(const Config& cfg, DType dt) {
  INFO(cfg.name << " " << dtype_name(dt));
  const std::vector<Shape> shapes = {{0}, {1}, {7}, {3, 11}, {4099}, {70, 1000}, {0, 3}};
  Generator gen(11);
  std::vector<Tensor> tuned_params, reference_params, initial;
  for (const Shape& s : shapes) {
    Tensor p = randn(s, gen, dt);
    initial.push_back(p);
    tuned_params.push_back(p.clone().requires_grad_());
    reference_params.push_back(p.clone().requires_grad_());
  }
  std::unique_ptr<Adam> tuned = make_optimizer(cfg, tuned_params);
  std::unique_ptr<Adam> reference = make_optimizer(cfg, reference_params);
  for (int step = 0; step < 4; ++step) {
    for (size_t k = 0; k < shapes.size(); ++k) {
      // Parameter 2 has no gradient in step 1: its step count falls behind the others'.
      const bool skip = step == 1 && k == 2;
      // Large gradients now and then, so that amsgrad's max keeps an old v.
      Tensor g = mul(randn(shapes[k], gen, dt), step == 2 ? 0.1 : 3.0);
      tuned_params[k].set_grad(skip ? Tensor() : g);
      reference_params[k].set_grad(skip ? Tensor() : g.clone());
    }
    {
      kernels::TunedKernelsGuard on(true);
      tuned->step();
    }
    kernels::TunedKernelsGuard off(false);
    reference->step();
  }
  for (size_t k = 0; k < shapes.size(); ++k) {
    INFO("parameter " << k << " of shape " << shape_str(shapes[k]));
    CHECK_BITWISE(tuned_params[k], reference_params[k]);
    const ParamState &a = tuned->state(k), &b = reference->state(k);
    CHECK(a.size() == b.size());
    for (const auto& [key, value] : a) {
      INFO(key);
      if (key == "step") {
        CHECK(value.item<int64_t>() == b.at(key).item<int64_t>());
      } else {
        CHECK_BITWISE(value, b.at(key));
      }
    }
  }
  CHECK_FALSE(test::bitwise_equal(tuned_params[5], initial[5]));  // the steps did update
}

}  // namespace

TEST_CASE("Adam/AdamW: tuned step and reference loop agree bitwise", "[optim][kernels]") {
  const std::vector<Config> configs = {
      {"Adam", false, false, 0.0},
      {"Adam + L2 weight decay", false, false, 0.1},
      {"Adam + amsgrad + L2 weight decay", false, true, 0.1},
      {"AdamW", true, false, 0.05},
      {"AdamW + amsgrad", true, true, 0.05},
      {"AdamW without weight decay", true, false, 0.0},
  };
  for (const Config& cfg : configs) {
    check_kernels_agree(cfg, kFloat32);
    check_kernels_agree(cfg, kFloat64);
  }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
