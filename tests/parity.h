// PyTorch parity: compares an op's forward and backward with the values PyTorch computed on the
// same inputs, stored in tests/fixtures/<family>.safetensors by tests/fixtures/gen_<family>.py
// (see tests/fixtures/common.py for the layout). Tolerances: float64 1e-10; float32 atol 1e-5 +
// rtol 1e-4.
#pragma once
#include <functional>
#include <map>
#include <string>

#include "nabla/core/io/safetensors.h"
#include "tests/helpers.h"

namespace nabla::test {

inline const io::SafetensorsFile& fixture(const std::string& family) {
  static std::map<std::string, io::SafetensorsFile> cache;
  auto it = cache.find(family);
  if (it == cache.end())
    it = cache
             .emplace(family, io::load_safetensors(std::string(NABLA_FIXTURE_DIR) + "/" + family +
                                                   ".safetensors"))
             .first;
  return it->second;
}

struct ParityTolerance {
  double atol64 = 1e-10, rtol64 = 1e-10;
  double atol32 = 1e-5, rtol32 = 1e-4;
};

// Runs fn on the case's inputs (float64, then float32) and checks output and gradients.
inline void check_parity(const std::string& family, const std::string& name,
                         const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                         ParityTolerance tol = {}) {
  const io::SafetensorsFile& f = fixture(family);
  INFO("parity case " << family << ":" << name);
  std::vector<Tensor> raw;
  for (int i = 0;; ++i) {
    const Tensor* t = f.find(name + ".in" + std::to_string(i));
    if (!t) break;
    raw.push_back(*t);
  }
  REQUIRE(!raw.empty());
  const Tensor& gout = f.at(name + ".gout");
  for (DType dt : {kFloat64, kFloat32}) {
    const std::string suffix = dt == kFloat64 ? "" : "_f32";
    const double atol = dt == kFloat64 ? tol.atol64 : tol.atol32;
    const double rtol = dt == kFloat64 ? tol.rtol64 : tol.rtol32;
    INFO("dtype " << dtype_name(dt));
    std::vector<Tensor> xs, wrt;
    std::vector<size_t> wrt_idx;
    for (size_t i = 0; i < raw.size(); ++i) {
      Tensor x = raw[i];
      if (is_floating(x.dtype())) {
        x = x.to(dt);
        if (f.find(name + ".grad" + std::to_string(i) + suffix)) {
          x = x.detach().requires_grad_();
          wrt.push_back(x);
          wrt_idx.push_back(i);
        }
      }
      xs.push_back(x);
    }
    Tensor out = fn(xs);
    CHECK_CLOSE(out, f.at(name + ".out" + suffix), atol, rtol);
    if (wrt.empty()) continue;
    REQUIRE(out.requires_grad());
    auto grads = autograd::grad({out}, wrt, {gout.to(dt)}, false, false, true);
    for (size_t j = 0; j < wrt.size(); ++j) {
      INFO("gradient of input " << wrt_idx[j]);
      Tensor expected = f.at(name + ".grad" + std::to_string(wrt_idx[j]) + suffix);
      Tensor g = grads[j].defined() ? grads[j] : zeros_like(expected);
      CHECK_CLOSE(g, expected, atol, rtol);
    }
  }
}

}  // namespace nabla::test
