// bfloat16 / float16 tensors: dtype facts, promotion, factories, to(), item, printing, byte-moving
// ops, and the upcast-compute-downcast rule of ops/reduced_float.h: each covered op's forward
// and backward equal the float32 op's rounded once to the input dtype.
#include <functional>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::bit_equal;

namespace {

const std::vector<DType> kReduced = {kBFloat16, kFloat16};

// The float32 value each element of t rounds to in dtype dt, computed element by element.
Tensor round_each(const Tensor& t32, DType dt) {
  std::vector<float> v = t32.contiguous().to_vector<float>();
  if (dt == kBFloat16) {
    std::vector<bfloat16> out(v.begin(), v.end());
    return from_vector(out, t32.shape());
  }
  std::vector<float16> out(v.begin(), v.end());
  return from_vector(out, t32.shape());
}

using Op = std::function<Tensor(const std::vector<Tensor>&)>;

// Runs op on reduced-float leaves and on float32 copies of them; the result and every input
// gradient of the first must be the second's rounded once (bit for bit), in the input dtype.
void check_rounded_once(const std::string& name, DType dt, const std::vector<Shape>& shapes,
                        const Op& op) {
  INFO(name << " in " << dtype_name(dt));
  Generator g(7);
  std::vector<Tensor> low, wide;
  for (const Shape& s : shapes) {
    Tensor x = randn(s, g).to(dt);
    wide.push_back(x.to(kFloat32).requires_grad_());
    low.push_back(x.requires_grad_());
  }
  Tensor y = op(low), y32 = op(wide);
  REQUIRE(y.dtype() == dt);
  CHECK(bit_equal(y, y32.detach().to(dt)));
  CHECK(bit_equal(y, round_each(y32.detach(), dt)));
  Tensor gout = randn(y.shape(), g).to(dt);
  y.backward(gout);
  y32.backward(gout.to(kFloat32));
  for (size_t i = 0; i < low.size(); ++i) {
    INFO("input " << i);
    REQUIRE(low[i].grad().defined());
    CHECK(low[i].grad().dtype() == dt);
    CHECK(bit_equal(low[i].grad(), round_each(wide[i].grad(), dt)));
  }
}

}  // namespace

TEST_CASE("half: dtype names, sizes and kinds", "[core][half]") {
  CHECK(std::string(dtype_name(kBFloat16)) == "bfloat16");
  CHECK(std::string(dtype_name(kFloat16)) == "float16");
  CHECK(dtype_size(kBFloat16) == 2);
  CHECK(dtype_size(kFloat16) == 2);
  CHECK(is_floating(kBFloat16));
  CHECK(is_floating(kFloat16));
  CHECK(is_reduced_float(kBFloat16));
  CHECK(!is_reduced_float(kFloat32));
  CHECK(dtype_of<bfloat16>() == kBFloat16);
  CHECK(dtype_of<float16>() == kFloat16);
}

TEST_CASE("half: type promotion follows PyTorch's", "[core][half]") {
  CHECK(promote_types("t", kBFloat16, kBFloat16) == kBFloat16);
  CHECK(promote_types("t", kFloat16, kFloat16) == kFloat16);
  CHECK(promote_types("t", kBFloat16, kFloat16) == kFloat32);
  CHECK(promote_types("t", kBFloat16, kFloat32) == kFloat32);
  CHECK(promote_types("t", kFloat64, kFloat16) == kFloat64);
  CHECK_THROWS_WITH(promote_types("add", kBFloat16, kInt64),
                    Contains("add") && Contains("bfloat16") && Contains("int64"));

  Tensor b = tensor({1, 2}).to(kBFloat16), h = tensor({1, 2}).to(kFloat16);
  CHECK((b + b).dtype() == kBFloat16);
  CHECK((b + h).dtype() == kFloat32);
  CHECK((b * tensor({3, 4})).dtype() == kFloat32);
  CHECK((h - tensor({3, 4}, kFloat64)).dtype() == kFloat64);
  CHECK((b * 0.5).dtype() == kBFloat16);  // a scalar keeps the tensor's dtype
  CHECK((2.0 - h).dtype() == kFloat16);
  CHECK_THROWS_AS(b + tensor({1, 2}).to(kInt64), DTypeError);
}

TEST_CASE("half: factories, to() both ways, item, from_vector", "[core][half]") {
  for (DType dt : kReduced) {
    INFO(dtype_name(dt));
    CHECK(zeros({2, 3}, dt).to(kFloat32).to_vector<float>() == std::vector<float>(6, 0.0f));
    CHECK(ones({4}, dt).to(kFloat64).to_vector<double>() == std::vector<double>(4, 1.0));
    // 0.1 is not representable: full() rounds it once.
    const float tenth = dt == kBFloat16 ? float(bfloat16(0.1f)) : float(float16(0.1f));
    CHECK(full({}, 0.1, dt).item<float>() == tenth);
    CHECK(tenth != 0.1f);
    CHECK(scalar_tensor(3.0, dt).item() == 3.0);

    // float32 -> dt -> float32 equals the element-wise conversion, including NaN, Inf, -0,
    // overflow and values below the smallest subnormal.
    Tensor x = tensor({1.0, -2.5, 1e-3, 70000.0, -1e-9, 3e38, -0.0, INFINITY, NAN, 0.1});
    Tensor low = x.to(dt);
    CHECK(low.dtype() == dt);
    CHECK(bit_equal(low, round_each(x, dt)));
    std::vector<float> back = low.to(kFloat32).to_vector<float>();
    CHECK(std::isinf(back[3]) == (dt == kFloat16));  // 70000 overflows float16 only
    CHECK(std::signbit(back[6]));
    CHECK(std::isnan(back[8]));
    // float64 goes through float32 (PyTorch's rule); int64 and bool convert by value.
    CHECK(bit_equal(x.to(kFloat64).to(dt), low));
    CHECK(tensor({257, -3}).to(kInt64).to(dt).to(kInt64).to_vector<int64_t>() ==
          std::vector<int64_t>{dt == kBFloat16 ? 256 : 257, -3});
    CHECK(tensor({0, 1}).to(kBool).to(dt).to(kFloat32).to_vector<float>() ==
          std::vector<float>{0, 1});
    // -1e-9 is below float16's smallest subnormal: -0, false.
    CHECK(low.to(kBool).to_vector<bool>() == std::vector<bool>{true, true, true, true,
                                                               dt == kBFloat16, true, false, true,
                                                               true, true});
    // bfloat16 <-> float16 directly: through float32, each rounding once.
    Tensor other = low.to(dt == kBFloat16 ? kFloat16 : kBFloat16);
    CHECK(bit_equal(other, round_each(low.to(kFloat32), other.dtype())));
  }
  Tensor v = from_vector(std::vector<bfloat16>{bfloat16::from_bits(0x3f80)}, {1});
  CHECK(v.item<float>() == 1.0f);
  CHECK(v.item<bfloat16>().bits == 0x3f80);
  CHECK(v.to_vector<bfloat16>()[0].bits == 0x3f80);
  CHECK_THROWS_AS(v.data_ptr<float>(), DTypeError);
}

TEST_CASE("half: printing shows the float32 values", "[core][half]") {
  CHECK(tensor({1.0, 0.1, -2.0}).to(kBFloat16).to_string() ==
        "tensor([1.0000, 0.1001, -2.0000], dtype=bfloat16)");
  // 1e-5 is a float16 subnormal: 168 * 2^-24.
  CHECK(tensor({1e-5, 65504, 1e5}).to(kFloat16).to_string() ==
        "tensor([1.0014e-05, 6.5504e+04, inf], dtype=float16)");
  Tensor r = tensor({1.5}).to(kBFloat16).requires_grad_();
  CHECK_THAT(r.to_string(), Contains("dtype=bfloat16") && Contains("requires_grad=True"));
}

TEST_CASE("half: views, clone, contiguous and byte-moving ops keep the bits", "[core][half]") {
  Generator g(3);
  for (DType dt : kReduced) {
    INFO(dtype_name(dt));
    Tensor x32 = randn({3, 4, 5}, g);
    Tensor x = x32.to(dt);
    Tensor t = x.transpose(0, 2);
    CHECK(!t.is_contiguous());
    CHECK(bit_equal(t.contiguous(), x32.transpose(0, 2).contiguous().to(dt)));
    CHECK(bit_equal(x.clone(), x));
    CHECK(bit_equal(x.select(1, 2), x32.select(1, 2).to(dt)));
    CHECK(
        bit_equal(x.reshape({12, 5}).narrow(0, 3, 4), x32.reshape({12, 5}).narrow(0, 3, 4).to(dt)));
    Tensor idx = tensor({2, 0}).to(kInt64);
    CHECK(bit_equal(index_select(x, 1, idx), index_select(x32, 1, idx).to(dt)));
    CHECK(bit_equal(cat({x, x}, 0), cat({x32, x32}, 0).to(dt)));
    CHECK(bit_equal(where(gt(x32, 0.0), x, neg(x)), abs(x32).to(dt)));
    Tensor filled = empty({2, 2}, dt);
    filled.fill_(0.1);
    CHECK(bit_equal(filled, full({2, 2}, 0.1, dt)));
    // Views with autograd: the gradient arrives through the view's backward (expand -> sum_to).
    Tensor leaf = x.select(0, 0).detach().requires_grad_();
    leaf.unsqueeze(0).expand({3, 4, 5}).transpose(1, 2).backward(ones({3, 5, 4}, dt));
    CHECK(leaf.grad().dtype() == dt);
    CHECK(bit_equal(leaf.grad(), full({4, 5}, 3.0, dt)));
  }
}

TEST_CASE("half: covered ops equal the float32 op rounded once, forward and backward",
          "[core][half]") {
  using V = const std::vector<Tensor>&;
  const Shape s = {3, 4};
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> unary = {
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"log", [](const Tensor& x) { return log(abs(x)); }},
      {"sqrt", [](const Tensor& x) { return sqrt(abs(x)); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"neg", [](const Tensor& x) { return neg(x); }},
      {"sin", [](const Tensor& x) { return sin(x); }},
      {"cos", [](const Tensor& x) { return cos(x); }},
      {"erf", [](const Tensor& x) { return erf(x); }},
      {"square", [](const Tensor& x) { return square(x); }},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }},
      {"rsqrt", [](const Tensor& x) { return rsqrt(abs(x)); }},
      {"pow", [](const Tensor& x) { return pow(x, 3.0); }},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.7); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, GeluApproximate::Tanh); }},
      {"silu", [](const Tensor& x) { return silu(x); }},
      {"scalar mul", [](const Tensor& x) { return x * 0.1; }},
      {"scalar rsub", [](const Tensor& x) { return 1.0 - x; }},
      {"scalar rdiv", [](const Tensor& x) { return 2.0 / x; }},
      {"sum", [](const Tensor& x) { return sum(x); }},
      {"sum dim", [](const Tensor& x) { return sum(x, {1}, true); }},
      {"mean", [](const Tensor& x) { return mean(x, {0}); }},
      {"softmax", [](const Tensor& x) { return softmax(x, -1); }},
      {"log_softmax", [](const Tensor& x) { return log_softmax(x, 0); }},
      {"transposed input", [](const Tensor& x) { return exp(x.t()); }},
  };
  for (DType dt : kReduced) {
    for (const auto& [name, f] : unary)
      check_rounded_once(name, dt, {s}, [&](V in) { return f(in[0]); });
    check_rounded_once("add broadcast", dt, {s, {4}}, [](V in) { return in[0] + in[1]; });
    check_rounded_once("sub", dt, {s, s}, [](V in) { return in[0] - in[1]; });
    check_rounded_once("mul broadcast", dt, {{3, 1}, s}, [](V in) { return in[0] * in[1]; });
    check_rounded_once("div", dt, {s, s}, [](V in) { return in[0] / in[1]; });
    check_rounded_once("maximum", dt, {s, s}, [](V in) { return maximum(in[0], in[1]); });
    check_rounded_once("pow tensor", dt, {s, s}, [](V in) { return pow(abs(in[0]), in[1]); });
    check_rounded_once("matmul", dt, {{2, 3, 4}, {4, 5}},
                       [](V in) { return matmul(in[0], in[1]); });
    check_rounded_once("linear", dt, {{3, 4}, {5, 4}, {5}},
                       [](V in) { return linear(in[0], in[1], in[2]); });
    check_rounded_once("reused input", dt, {s}, [](V in) { return in[0] * in[0]; });
    check_rounded_once("layer_norm", dt, {{2, 3, 4}, {4}, {4}},
                       [](V in) { return layer_norm(in[0], {4}, in[1], in[2]); });
    check_rounded_once("size-0", dt, {{0, 4}}, [](V in) { return exp(in[0]); });
    check_rounded_once("size-1", dt, {{1}, s}, [](V in) { return in[0] * in[1]; });
  }
}

TEST_CASE("half: mixed dtypes promote, and gradients come back in each input's dtype",
          "[core][half]") {
  Tensor b = tensor({0.1, 2.0, -3.0}).to(kBFloat16).requires_grad_();
  Tensor f = tensor({1.0, 0.3, 0.7}).requires_grad_();
  Tensor y = b * f;
  CHECK(y.dtype() == kFloat32);
  CHECK(bit_equal(y.detach(), b.detach().to(kFloat32) * f.detach()));  // no rounding to bf16
  y.backward(ones({3}));
  CHECK(b.grad().dtype() == kBFloat16);
  CHECK(f.grad().dtype() == kFloat32);
  CHECK(bit_equal(b.grad(), f.detach().to(kBFloat16)));
  CHECK(bit_equal(f.grad(), b.detach().to(kFloat32)));

  // Comparisons: exact in the promoted dtype, bool results; the same dtype compares directly.
  Tensor h = tensor({0.1, 2.0, -3.0}).to(kFloat16);
  CHECK(eq(b.detach(), h).to_vector<bool>() == std::vector<bool>{false, true, true});
  CHECK(lt(b.detach(), tensor({0.1, 2.0, -2.0})).to_vector<bool>() ==
        std::vector<bool>{false, false, true});  // bf16(0.1) = 0.10009765625 > 0.1f
  CHECK(gt(h, h).to_vector<bool>() == std::vector<bool>{false, false, false});
  // In-place ops round once into self.
  Tensor acc = zeros({3}, kBFloat16);
  acc += b.detach();
  acc *= tensor({0.5, 0.5, 0.5}).to(kBFloat16);
  CHECK(bit_equal(acc, (b.detach().to(kFloat32) * 0.5).to(kBFloat16)));
}

TEST_CASE("half: an op without reduced-float support names itself and says .to(kFloat32)",
          "[core][half]") {
  for (DType dt : kReduced) {
    Tensor x = ones({2, 3}, dt);
    CHECK_THROWS_MATCHES(
        log_sigmoid(x), DTypeError,
        Catch::Matchers::Message(std::string("log_sigmoid: has no ") + dtype_name(dt) +
                                 " kernel (" + dtype_name(dt) +
                                 " is a storage dtype, computed in float32 only by the ops that "
                                 "support it); convert with .to(kFloat32)"));
  }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
