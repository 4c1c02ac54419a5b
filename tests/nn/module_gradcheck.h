// gradcheck for modules: checks the gradient with respect to the given inputs and every
// parameter of the module (float64). gradcheck perturbs its inputs in place, and a module's
// parameters are the very tensors the module reads, so fn can simply call the module.
#pragma once
#include <functional>
#include <vector>

#include "tests/helpers.h"

namespace nabla::test {

inline GradcheckResult module_gradcheck(nn::Module& m, const std::vector<Tensor>& inputs,
                                        const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                        bool second_order = false) {
  std::vector<Tensor> all = inputs;
  for (const Tensor& p : m.parameters()) all.push_back(p);
  const size_t n = inputs.size();
  auto wrapped = [&](const std::vector<Tensor>& xs) {
    return fn(std::vector<Tensor>(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(n)));
  };
  return second_order ? gradgradcheck(wrapped, all) : gradcheck(wrapped, all);
}

#define CHECK_MODULE_GRADCHECK(module, inputs, fn)                       \
  do {                                                                   \
    auto _r = ::nabla::test::module_gradcheck((module), (inputs), (fn)); \
    INFO(_r.message);                                                    \
    CHECK(_r.ok);                                                        \
  } while (0)

#define CHECK_MODULE_GRADGRADCHECK(module, inputs, fn)                         \
  do {                                                                         \
    auto _r = ::nabla::test::module_gradcheck((module), (inputs), (fn), true); \
    INFO(_r.message);                                                          \
    CHECK(_r.ok);                                                              \
  } while (0)

}  // namespace nabla::test
