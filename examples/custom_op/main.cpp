// A differentiable op written outside the library: softplus as an autograd::Function, checked
// with gradcheck and gradgradcheck and used in a small training step. docs/custom-ops.md.
#include <fmt/format.h>
#include <nabla/nabla.h>

#include <algorithm>
#include <cmath>

using namespace nabla;

// Your own ops in your own namespace: nabla has a softplus too (nabla::softplus), which this one
// is checked against below.
namespace my {

// softplus(x) = log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (there the two
// agree to rounding and exp would overflow), as torch.nn.functional.softplus.
struct Softplus : autograd::Function<Softplus> {
  static Tensor forward(autograd::FunctionCtx* ctx, const Tensor& x, double beta,
                        double threshold) {
    ctx->save_for_backward({x});
    ctx->saved_data["beta"] = beta;
    ctx->saved_data["threshold"] = threshold;
    // One pass over x with a scalar function; checks the dtype (float32 or float64).
    return kernels::map_float("softplus", x, [beta, threshold](auto v) {
      using T = decltype(v);
      const double bx = beta * static_cast<double>(v);
      return bx > threshold ? v : static_cast<T>(std::log1p(std::exp(bx)) / beta);
    });
  }

  // d softplus / dx = sigmoid(beta x), and 1 where the op is linear. Written with ops, so the
  // engine can differentiate it again (gradgradcheck, create_graph).
  static std::vector<Tensor> backward(autograd::FunctionCtx* ctx,
                                      const std::vector<Tensor>& grads) {
    const Tensor x = ctx->get_saved_variables()[0];
    const auto beta = ctx->saved<double>("beta");
    const auto threshold = ctx->saved<double>("threshold");
    const Tensor bx = mul(x, beta);
    const Tensor slope = where(gt(bx, threshold), ones_like(x), sigmoid(bx));
    // One gradient per forward argument after ctx: x, beta, threshold.
    return {mul(grads[0], slope), Tensor(), Tensor()};
  }
};

Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0) {
  return Softplus::apply(x, beta, threshold);
}

}  // namespace my

int main() {
  // Float64 inputs on both sides of the threshold (beta x = 2 * 12 > 20 for the last).
  Tensor x = tensor({-3.0, -0.5, 0.0, 0.7, 2.5, 12.0}, kFloat64).requires_grad_();
  auto f = [](const std::vector<Tensor>& in) { return my::softplus(in[0], 2.0); };
  const GradcheckResult first = gradcheck(f, {x});
  const GradcheckResult second = gradgradcheck(f, {x});
  fmt::print("gradcheck: {}\ngradgradcheck: {}\n", first.ok ? "ok" : first.message,
             second.ok ? "ok" : second.message);

  // The same values as the formula log(1 + exp(x)) and as nabla's own softplus.
  Tensor z = tensor({-2.0, 0.0, 1.5});
  const double gap = std::max(max(abs(sub(my::softplus(z), log(add(exp(z), 1.0))))).item(),
                              max(abs(sub(my::softplus(z), nabla::softplus(z)))).item());
  fmt::print("largest difference from log(1 + exp(x)) and nabla::softplus: {:.2e}\n", gap);

  // As any op inside a model: fit w so that softplus(w * t) matches 2 t (w ends near 2, a little
  // below: softplus(u) > u).
  Tensor t = tensor({0.5, 1.0, 2.0, 3.0});
  Tensor w = tensor({0.5}).requires_grad_();
  for (int step = 0; step < 200; ++step) {
    Tensor loss = mean(square(sub(my::softplus(mul(t, w)), mul(t, 2.0))));
    w.set_grad(Tensor());
    loss.backward();
    NoGradGuard no_grad;
    w.copy_(sub(w, mul(w.grad(), 0.05)));
  }
  fmt::print("fitted w = {:.3f}\n", w.item());
  const bool ok = first.ok && second.ok && gap < 1e-6 && std::abs(w.item() - 2.0) < 0.1;
  fmt::print("RESULT example=custom_op {}\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
