// autograd::Function (core/custom_function.h): gradients through a custom op, gradients of
// gradients, saved tensors' in-place check, saved non-tensor values, non-differentiable and
// integer outputs, outputs that alias inputs, and the errors a wrong Function gets.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using autograd::FunctionCtx;
using Catch::Matchers::Contains;
using test::leaf;

namespace {

// y = x^3 * scale, saving the input x; backward written with ops (3 x^2 scale grad).
struct Cube : autograd::Function<Cube> {
  static Tensor forward(FunctionCtx* ctx, const Tensor& x, double scale) {
    ctx->save_for_backward({x});
    ctx->saved_data["scale"] = scale;
    return mul(mul(mul(x, x), x), scale);
  }
  static std::vector<Tensor> backward(FunctionCtx* ctx, const std::vector<Tensor>& g) {
    Tensor x = ctx->get_saved_variables()[0];
    return {mul(g[0], mul(mul(x, x), 3.0 * ctx->saved<double>("scale"))), Tensor()};
  }
};

// y = exp(x), saving its own output (no reference cycle; double backward through it).
struct Exp : autograd::Function<Exp> {
  static Tensor forward(FunctionCtx* ctx, const Tensor& x) {
    Tensor y = exp(x);
    ctx->save_for_backward({y});
    return y;
  }
  static std::vector<Tensor> backward(FunctionCtx* ctx, const std::vector<Tensor>& g) {
    return {mul(g[0], ctx->get_saved_variables()[0])};
  }
};

// a * b with two tensor inputs; records which inputs need a gradient.
struct Mul : autograd::Function<Mul> {
  static inline std::vector<bool> seen;
  static Tensor forward(FunctionCtx* ctx, const Tensor& a, const Tensor& b) {
    ctx->save_for_backward({a, b});
    return mul(a, b);
  }
  static std::vector<Tensor> backward(FunctionCtx* ctx, const std::vector<Tensor>& g) {
    seen = {ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    auto s = ctx->get_saved_variables();
    return {ctx->needs_input_grad(0) ? mul(g[0], s[1]) : Tensor(), mul(g[0], s[0])};
  }
};

// Values and a float mask (marked non-differentiable) and int64 indices.
struct ReluWithMask : autograd::Function<ReluWithMask> {
  static std::vector<Tensor> forward(FunctionCtx* ctx, const Tensor& x) {
    Tensor mask = gt(x, 0.0).to(x.dtype());
    Tensor idx = argmax(x, -1);
    ctx->save_for_backward({mask});
    ctx->mark_non_differentiable({mask});
    return {mul(x, mask), mask, idx};
  }
  static std::vector<Tensor> backward(FunctionCtx* ctx, const std::vector<Tensor>& g) {
    CHECK_FALSE(g[1].defined());  // only the differentiable output has a gradient
    CHECK_FALSE(g[2].defined());
    return {mul(g[0], ctx->get_saved_variables()[0])};
  }
};

struct TwoOutputs : autograd::Function<TwoOutputs> {
  static std::vector<Tensor> forward(FunctionCtx*, const Tensor& x) { return {mul(x, 2.0), x}; }
  static std::vector<Tensor> backward(FunctionCtx*, const std::vector<Tensor>& g) { return {g[0]}; }
};

struct Identity : autograd::Function<Identity> {
  static Tensor forward(FunctionCtx*, const Tensor& x) { return x; }
  static std::vector<Tensor> backward(FunctionCtx*, const std::vector<Tensor>& g) {
    return {mul(g[0], 2.0)};  // deliberately not 1, to see this node ran
  }
};

struct WrongCount : autograd::Function<WrongCount> {
  static Tensor forward(FunctionCtx*, const Tensor& x, double) { return mul(x, 1.0); }
  static std::vector<Tensor> backward(FunctionCtx*, const std::vector<Tensor>& g) { return {g[0]}; }
};

struct BadSavedType : autograd::Function<BadSavedType> {
  static Tensor forward(FunctionCtx* ctx, const Tensor& x) {
    ctx->saved_data["n"] = 3;
    return mul(x, 1.0);
  }
  static std::vector<Tensor> backward(FunctionCtx* ctx, const std::vector<Tensor>& g) {
    return {mul(g[0], ctx->saved<double>("n"))};
  }
};

}  // namespace

TEST_CASE("custom Function: gradcheck and gradgradcheck", "[core][custom_function]") {
  for (const Shape& s : {Shape{}, Shape{1}, Shape{2, 3}, Shape{0, 2}}) {
    INFO("shape " << shape_str(s));
    Tensor x = leaf(s, 1);
    auto cube = [](auto& in) { return Cube::apply(in[0], 0.5); };
    CHECK_GRADCHECK(cube, std::vector<Tensor>{x});
    CHECK_GRADGRADCHECK(cube, std::vector<Tensor>{x});
    auto e = [](auto& in) { return Exp::apply(in[0]); };
    CHECK_GRADCHECK(e, std::vector<Tensor>{x});
    CHECK_GRADGRADCHECK(e, std::vector<Tensor>{x});
  }
  Tensor xt = leaf({3, 2}, 2).detach().t().requires_grad_();  // non-contiguous
  auto m = [](auto& in) { return Mul::apply(in[0], in[1]); };
  CHECK_GRADCHECK(m, (std::vector<Tensor>{xt, leaf({2, 3}, 3)}));
  CHECK_GRADGRADCHECK(m, (std::vector<Tensor>{xt, leaf({2, 3}, 3)}));
  // The node's name comes from the struct's.
  CHECK(std::string(Cube::apply(leaf({2}), 1.0).grad_fn()->name()) == "CubeBackward");
}

TEST_CASE("custom Function: needs_input_grad and no recording", "[core][custom_function]") {
  Tensor a = leaf({3}, 1).detach(), b = leaf({3}, 2);
  Tensor y = Mul::apply(a, b);
  sum(y).backward();
  CHECK(Mul::seen == std::vector<bool>{false, true});
  CHECK_CLOSE(b.grad(), a, 0.0, 0.0);
  {
    NoGradGuard no_grad;
    CHECK_FALSE(Mul::apply(b, b).requires_grad());
  }
  CHECK_FALSE(Mul::apply(a, a).requires_grad());
}

TEST_CASE("custom Function: a saved tensor changed in place is an error at backward",
          "[core][custom_function]") {
  Tensor x = leaf({4}, 1);
  Tensor xd = x.detach();  // shares storage with the saved x
  Tensor y = Cube::apply(x, 1.0);
  xd.fill_(2.0);
  CHECK_THROWS_AS(sum(y).backward(), AutogradError);
  Tensor z = Cube::apply(x, 1.0);
  xd.fill_(3.0);
  CHECK_THROWS_WITH(sum(z).backward(), Contains("CubeBackward") && Contains("in-place"));
  // Saved outputs too.
  Tensor e = Exp::apply(leaf({2}, 5));
  e.detach().fill_(0.0);
  CHECK_THROWS_WITH(sum(e).backward(), Contains("ExpBackward") && Contains("in-place"));
  // A second backward without retain_graph.
  Tensor w = Cube::apply(leaf({2}, 6), 1.0);
  sum(w).backward();
  CHECK_THROWS_WITH(sum(w).backward(), Contains("retain_graph"));
}

TEST_CASE("custom Function: non-differentiable and integer outputs", "[core][custom_function]") {
  Tensor x = leaf({2, 3}, 1);
  auto outs = ReluWithMask::apply(x);
  REQUIRE(outs.size() == 3);
  CHECK(outs[0].requires_grad());
  CHECK_FALSE(outs[1].requires_grad());
  CHECK_FALSE(outs[2].requires_grad());
  CHECK(outs[2].dtype() == kInt64);
  auto relu_fn = [](auto& in) { return ReluWithMask::apply(in[0])[0]; };
  CHECK_GRADCHECK(relu_fn, std::vector<Tensor>{x});
  // Two differentiable outputs cannot share one node.
  CHECK_THROWS_WITH(TwoOutputs::apply(x),
                    Contains("TwoOutputsBackward") && Contains("mark_non_differentiable"));
}

TEST_CASE("custom Function: an input returned as is keeps its own history",
          "[core][custom_function]") {
  Tensor x = leaf({3}, 1);
  Tensor y = Identity::apply(x);
  CHECK(x.is_leaf());
  CHECK(y.grad_fn() != nullptr);
  sum(y).backward();
  CHECK_CLOSE(x.grad(), full({3}, 2.0, kFloat64), 0.0, 0.0);
}

TEST_CASE("custom Function: errors name the Function", "[core][custom_function]") {
  Tensor x = leaf({2}, 1);
  CHECK_THROWS_WITH(sum(WrongCount::apply(x, 1.0)).backward(),
                    Contains("WrongCountBackward") && Contains("returned 1 gradients, expected 2"));
  CHECK_THROWS_WITH(sum(BadSavedType::apply(x)).backward(),
                    Contains("BadSavedTypeBackward") && Contains("saved_data['n']"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
