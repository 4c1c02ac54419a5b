// PyTorch parity for a whole module: the torch module's (perturbed) state_dict is loaded by name
// into the nabla module (strictly: every name on both sides), then outputs and the gradients of
// every input and parameter are compared, in float64 (1e-10) and float32 (atol 1e-5 + rtol 1e-4).
// Fixture layout: tests/fixtures/module_cases.py.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tests/parity.h"

namespace nabla::test {

using ModuleFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

inline void check_module_parity(const std::string& family, const std::string& name, nn::Module& m,
                                const ModuleFn& fn) {
  const io::SafetensorsFile& f = fixture(family);
  INFO("parity case " << family << ":" << name);
  nn::StateDict state;
  const std::string prefix = name + ".state.";
  for (const auto& [key, t] : f.tensors)
    if (key.rfind(prefix, 0) == 0) state.emplace_back(key.substr(prefix.size()), t);
  REQUIRE(!state.empty());
  std::vector<Tensor> raw;
  for (int i = 0; f.find(name + ".in" + std::to_string(i)); ++i)
    raw.push_back(f.at(name + ".in" + std::to_string(i)));

  for (DType dt : {kFloat64, kFloat32}) {
    const std::string suffix = dt == kFloat64 ? "" : "_f32";
    const double atol = dt == kFloat64 ? 1e-10 : 1e-5, rtol = dt == kFloat64 ? 1e-10 : 1e-4;
    INFO("dtype " << dtype_name(dt));
    m.to(dt);
    m.load_state_dict(state);  // strict: every PyTorch name must exist here and vice versa
    std::vector<Tensor> xs, wrt;
    std::vector<std::string> wrt_names;
    for (size_t i = 0; i < raw.size(); ++i) {
      Tensor x = raw[i];
      if (is_floating(x.dtype())) {
        x = x.to(dt);
        const std::string gname = name + ".grad.in" + std::to_string(i) + suffix;
        if (f.find(gname)) {
          x = x.detach().requires_grad_();
          wrt.push_back(x);
          wrt_names.push_back(gname);
        }
      }
      xs.push_back(x);
    }
    for (const auto& [pname, p] : m.named_parameters()) {
      wrt.push_back(p);
      wrt_names.push_back(name + ".grad.state." + pname + suffix);
    }
    std::vector<Tensor> outs = fn(xs), gouts;
    for (size_t j = 0; j < outs.size(); ++j) {
      INFO("output " << j);
      CHECK_CLOSE(outs[j], f.at(name + ".out" + std::to_string(j) + suffix), atol, rtol);
      gouts.push_back(f.at(name + ".gout" + std::to_string(j)).to(dt));
    }
    CHECK(!f.find(name + ".out" + std::to_string(outs.size()) + suffix));  // no output missed
    auto grads = autograd::grad(outs, wrt, gouts, false, false, /*allow_unused=*/true);
    for (size_t k = 0; k < wrt.size(); ++k) {
      INFO("gradient " << wrt_names[k]);
      const Tensor& expected = f.at(wrt_names[k]);
      CHECK_CLOSE(grads[k].defined() ? grads[k] : zeros_like(expected), expected, atol, rtol);
    }
  }
}

}  // namespace nabla::test
