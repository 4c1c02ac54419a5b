#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

TEST_CASE("factories give the right shapes, dtypes and values", "[core]") {
  Tensor z = zeros({2, 3});
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.dtype() == kFloat32);
  CHECK(z.to_vector<float>() == std::vector<float>(6, 0.f));
  CHECK(ones({2}, kFloat64).to_vector<double>() == std::vector<double>{1, 1});
  CHECK(full({2}, 7, kInt64).to_vector<int64_t>() == std::vector<int64_t>{7, 7});
  CHECK(arange(5).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(arange(1.0, 2.0, 0.25, kFloat64).to_vector<double>() ==
        std::vector<double>{1.0, 1.25, 1.5, 1.75});
  auto ls = linspace(0, 1, 5, kFloat64).to_vector<double>();
  CHECK(ls == std::vector<double>{0, 0.25, 0.5, 0.75, 1.0});
  Tensor s = scalar_tensor(3.5);
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.item<float>() == 3.5f);
  CHECK(tensor({{1, 2}, {3, 4}}).shape() == Shape{2, 2});
  CHECK(zeros({0, 3}).numel() == 0);
  CHECK_THROWS_AS(zeros({-1}), ShapeError);
}

TEST_CASE("storage is 64-byte aligned and shared by copies", "[core]") {
  Tensor a = zeros({3, 5});
  CHECK(reinterpret_cast<uintptr_t>(a.storage()->data()) % 64 == 0);
  Tensor b = a;
  b.fill_(2);
  CHECK(a.to_vector<float>()[0] == 2.f);
}

TEST_CASE("random factories are reproducible from the seed", "[core]") {
  Generator g1(42), g2(42), g3(43);
  Tensor a = randn({100}, g1), b = randn({100}, g2), c = randn({100}, g3);
  CHECK(a.to_vector<float>() == b.to_vector<float>());
  CHECK(a.to_vector<float>() != c.to_vector<float>());
  // A second draw continues the stream.
  CHECK(randn({100}, g1).to_vector<float>() != a.to_vector<float>());
  // Moments of a large sample.
  Generator g(7);
  auto v = randn({200000}, g, kFloat64).to_vector<double>();
  double m = 0, s2 = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) s2 += (x - m) * (x - m);
  s2 /= static_cast<double>(v.size());
  CHECK(std::abs(m) < 0.01);
  CHECK(std::abs(s2 - 1) < 0.01);
  auto u = rand({100000}, g, kFloat64).to_vector<double>();
  for (double x : u) REQUIRE((x >= 0 && x < 1));
  auto r = randint(3, 7, {1000}, g).to_vector<int64_t>();
  for (int64_t x : r) REQUIRE((x >= 3 && x < 7));
}

TEST_CASE("views share storage and have the right strides", "[core]") {
  Tensor a = arange(0.0, 24.0, 1.0, kFloat32).view({2, 3, 4});
  CHECK(a.strides() == Shape{12, 4, 1});
  Tensor t = a.transpose(0, 2);
  CHECK(t.shape() == Shape{4, 3, 2});
  CHECK(t.strides() == Shape{1, 4, 12});
  CHECK(!t.is_contiguous());
  CHECK(t.contiguous().is_contiguous());
  CHECK(t.contiguous().to_vector<float>()[1] == 12.f);
  Tensor p = a.permute({1, 2, 0});
  CHECK(p.shape() == Shape{3, 4, 2});
  CHECK(a.narrow(1, 1, 2).to_vector<float>() ==
        std::vector<float>{4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23});
  CHECK(a.select(2, 3).to_vector<float>() == std::vector<float>{3, 7, 11, 15, 19, 23});
  CHECK(a.slice(2, 0, 4, 2).to_vector<float>() ==
        std::vector<float>{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22});
  CHECK(a.unsqueeze(0).shape() == Shape{1, 2, 3, 4});
  CHECK(a.unsqueeze(-1).shape() == Shape{2, 3, 4, 1});
  CHECK(a.unsqueeze(0).squeeze().shape() == Shape{2, 3, 4});
  CHECK(a.flatten(1).shape() == Shape{2, 12});
  CHECK(a.flatten().shape() == Shape{24});
  CHECK(a.view({-1, 4}).shape() == Shape{6, 4});
  CHECK(a.unflatten(2, {2, 2}).shape() == Shape{2, 3, 2, 2});
  Tensor e = tensor({1, 2, 3}).expand({2, 3});
  CHECK(e.strides() == Shape{0, 1});
  CHECK(e.contiguous().to_vector<float>() == std::vector<float>{1, 2, 3, 1, 2, 3});
  // Writes through a view are visible in the base.
  Tensor col = a.select(1, 0);
  col.fill_(-1);
  CHECK(a.to_vector<float>()[0] == -1.f);
  CHECK(a.to_vector<float>()[12] == -1.f);
}

TEST_CASE("view refuses incompatible strides, reshape copies", "[core]") {
  Tensor a = arange(0.0, 6.0, 1.0, kFloat32).view({2, 3}).t();
  CHECK_THROWS_AS(a.view({6}), ShapeError);
  Tensor r = a.reshape({6});
  CHECK(r.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK_THROWS_WITH(a.view({4}), Contains("view") && Contains("(4,)"));
  CHECK_THROWS_AS(a.reshape({-1, -1}), ShapeError);
}

TEST_CASE("dims are checked in one place: the error names the op, the dim and the shape",
          "[core]") {
  Tensor a = zeros({2, 3});
  CHECK_THROWS_WITH(a.size(2),
                    Contains("size: dim 2 is out of range [-2, 1]") && Contains("shape (2, 3)"));
  CHECK_THROWS_WITH(a.unsqueeze(4), Contains("unsqueeze: dim 4 is out of range [-3, 2]"));
  CHECK(a.unsqueeze(-1).shape() == Shape{2, 3, 1});
  // A 0-d tensor accepts dim 0 and -1 where no dim is read (PyTorch's rule)...
  Tensor s = scalar_tensor(1.0);
  CHECK(s.unsqueeze(-1).shape() == Shape{1});
  CHECK(sum(s, {-1}).dim() == 0);
  CHECK_THROWS_WITH(sum(s, {0, -1}), Contains("dim -1 appears twice"));
  // ... but has no dim whose size or stride could be read.
  CHECK_THROWS_WITH(s.size(0), Contains("size: dim 0 of a 0-d tensor"));
  CHECK_THROWS_WITH(s.stride(-1), Contains("stride: dim -1 of a 0-d tensor"));
  CHECK_THROWS_WITH(s.select(0, 0), Contains("select: dim 0 of a 0-d tensor"));
  CHECK_THROWS_WITH(s.slice(0, 0, 1), Contains("slice"));
  CHECK_THROWS_WITH(s.narrow(0, 0, 1), Contains("narrow"));
  CHECK_THROWS_WITH(s.unflatten(0, {1}), Contains("unflatten"));
}

TEST_CASE("reshape_fresh_ and set_data_ change a tensor's metadata in place", "[core]") {
  Tensor y = arange(6, kFloat64);
  const TensorImpl* impl = &y.impl();
  reshape_fresh_(y, {2, 3});
  CHECK(&y.impl() == impl);
  CHECK(y.shape() == Shape{2, 3});
  CHECK(y.strides() == Shape{3, 1});
  CHECK(y.select(0, 1).to_vector<double>() == std::vector<double>{3, 4, 5});
  CHECK_THROWS_WITH(reshape_fresh_(y, {4}), Contains("(4,)") && Contains("6 elements"));
  Tensor transposed = y.t();
  CHECK_THROWS_WITH(reshape_fresh_(transposed, {6}), Contains("fresh contiguous"));
  Tensor x = ones({3}, kFloat64).requires_grad_();
  Tensor z = mul(x, 2.0);
  CHECK_THROWS_WITH(reshape_fresh_(z, {3, 1}), Contains("grad_fn"));

  Tensor p = zeros({2}, kFloat64).requires_grad_();
  Tensor handle = p;  // another handle, as an optimizer keeps
  p.set_grad(ones({2}, kFloat64));
  set_data_(p, full({3}, 7.0, kFloat32));
  CHECK(handle.dtype() == kFloat32);
  CHECK(handle.to_vector<float>() == std::vector<float>{7, 7, 7});
  CHECK(!handle.grad().defined());  // the old gradient no longer fits
  CHECK(handle.requires_grad());
}

TEST_CASE("bad view arguments throw with the op and shapes", "[core]") {
  Tensor a = zeros({2, 3});
  CHECK_THROWS_WITH(a.transpose(0, 2), Contains("transpose") && Contains("dim 2"));
  CHECK_THROWS_WITH(a.narrow(1, 2, 2), Contains("narrow"));
  CHECK_THROWS_WITH(a.select(0, 5), Contains("select") && Contains("index 5"));
  CHECK_THROWS_WITH(a.expand({4, 3}), Contains("expand") && Contains("(2, 3)"));
  CHECK_THROWS_WITH(a.permute({0, 0}), Contains("permute"));
  CHECK_THROWS_AS(a.item<float>(), ValueError);
  CHECK_THROWS_AS(a.data_ptr<double>(), DTypeError);
}

TEST_CASE("dtype conversion and element access", "[core]") {
  Tensor a = tensor({1.5, -2.5, 3.0}, kFloat64);
  CHECK(a.to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{1, -2, 3});
  CHECK(a.to(kFloat32).to_vector<float>() == std::vector<float>{1.5f, -2.5f, 3.f});
  CHECK(a.to(kBool).to_vector<bool>() == std::vector<bool>{true, true, true});
  CHECK(from_vector<int64_t>({1, 2, 3, 4}, {2, 2}).select(0, 1).to_vector<int64_t>() ==
        std::vector<int64_t>{3, 4});
  CHECK_THROWS_AS(from_vector<float>({1, 2, 3}, {2, 2}), ShapeError);
}

TEST_CASE("printing reads like PyTorch", "[core]") {
  CHECK(tensor({{1, 2}, {3, 4}}).to_string() ==
        "tensor([[1.0000, 2.0000],\n        [3.0000, 4.0000]])");
  CHECK(tensor({1, 2}, kFloat64).to_string() == "tensor([1.0000, 2.0000], dtype=float64)");
  CHECK(arange(3).to_string() == "tensor([0, 1, 2])");
  CHECK(scalar_tensor(2).to_string() == "tensor(2.0000)");
  Tensor x = ones({2}).requires_grad_();
  CHECK(x.to_string() == "tensor([1.0000, 1.0000], requires_grad=True)");
  CHECK_THAT(zeros({2000}).to_string(), Contains("..."));
  CHECK(zeros({0, 2}).to_string() == "tensor([], size=(0, 2))");
}

TEST_CASE("copy_ broadcasts and converts, fill_ and copy_ bump the version", "[core]") {
  Tensor a = zeros({2, 3}, kFloat64);
  uint64_t v0 = a.storage()->version();
  a.copy_(tensor({1, 2, 3}, kFloat32));
  CHECK(a.to_vector<double>() == std::vector<double>{1, 2, 3, 1, 2, 3});
  CHECK(a.storage()->version() == v0 + 1);
  a.zero_();
  CHECK(a.storage()->version() == v0 + 2);
  CHECK_THROWS_AS(a.copy_(zeros({4})), ShapeError);
}

TEST_CASE("runtime_info reports the OpenMP OpenBLAS", "[core]") {
  std::string info = runtime_info();
  CHECK_THAT(info, Contains("openmp"));
}

// Found by fuzz_safetensors: a (0, 0, N) tensor read from a file reported itself non-contiguous,
// because size-0 dims get the strides of size 1. Any tensor without elements is contiguous.
TEST_CASE("a tensor without elements is contiguous whatever its shape", "[core]") {
  for (const Shape& shape : {Shape{0}, Shape{0, 0, 5}, Shape{3, 0, 7}, Shape{0, 1, 4}})
    CHECK(zeros(shape).is_contiguous());
  CHECK(zeros({0, 0, 11686018904}).is_contiguous());  // the fuzzer's shape: no bytes allocated
  CHECK(zeros({0, 5}).t().is_contiguous());
  CHECK(!zeros({2, 3}).t().is_contiguous());
}

}  // namespace NABLA_UNITY_ID
}  // namespace
