#include "nabla/ops/kernels/gelu.h"

#include "nabla/ops/kernel_helpers.h"

namespace nabla::kernels {

Tensor gelu_forward(const Tensor& x, GeluApproximate approximate) {
  // One loop per form, so the form is a constant inside it and the loop vectorises.
  return approximate == GeluApproximate::None
             ? map_float("gelu", x, [](auto v) { return gelu_value<GeluApproximate::None>(v); })
             : map_float("gelu", x, [](auto v) { return gelu_value<GeluApproximate::Tanh>(v); });
}

Tensor gelu_grad(const Tensor& grad, const Tensor& x, GeluApproximate approximate) {
  return approximate == GeluApproximate::None
             ? map_binary_float(
                   "gelu_backward", grad, x,
                   [](auto g, auto v) { return g * gelu_derivative<GeluApproximate::None>(v); })
             : map_binary_float("gelu_backward", grad, x, [](auto g, auto v) {
                 return g * gelu_derivative<GeluApproximate::Tanh>(v);
               });
}

}  // namespace nabla::kernels
