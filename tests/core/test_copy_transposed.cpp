// Transposed copies (core/copy.cpp's tile path) against a byte-by-byte reference of the strided
// layout: every dtype, shapes that are not multiples of the tile, size-0 and size-1 dims, batch
// dims, strides from slicing and permuting, and the generic path for what is not a transpose.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

// Row-major bytes of a strided view, element by element from its strides.
std::vector<unsigned char> strided_bytes(const Tensor& t) {
  const size_t elem = dtype_size(t.dtype());
  const auto* base = static_cast<const unsigned char*>(t.storage()->data());
  std::vector<unsigned char> out;
  std::vector<int64_t> idx(t.shape().size(), 0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t off = t.offset();
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides()[d];
    const unsigned char* p = base + static_cast<size_t>(off) * elem;
    out.insert(out.end(), p, p + elem);
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.shape()[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

Tensor random_of(DType dt, const Shape& shape, uint64_t seed) {
  Generator g(seed);
  if (dt == kInt64) return randint(-1000000, 1000000, shape, g);
  if (dt == kBool) return gt(randn(shape, g), 0.0);
  return randn(shape, g, kFloat64).to(dt);
}

void check_copy(const Tensor& view) {
  INFO("dtype " << dtype_name(view.dtype()) << ", shape " << shape_str(view.shape()));
  const Tensor copy = view.contiguous();
  CHECK(copy.is_contiguous());
  CHECK(copy.shape() == view.shape());
  CHECK(strided_bytes(copy) == strided_bytes(view));
}

}  // namespace

TEST_CASE("transposed contiguous() copies are bitwise the strided elements", "[core]") {
  const std::vector<Shape> shapes = {{1, 1},    {0, 5},    {5, 0},      {1, 7},        {7, 1},
                                     {8, 8},    {16, 16},  {17, 33},    {64, 9},       {130, 70},
                                     {3, 1, 5}, {2, 0, 4}, {3, 19, 21}, {2, 3, 16, 17}};
  uint64_t seed = 1;
  for (DType dt : {kFloat32, kFloat64, kInt64, kBool, kBFloat16, kFloat16}) {
    for (const Shape& s : shapes) {
      const Tensor x = random_of(dt, s, seed++);
      check_copy(x.transpose(-1, -2));
      if (s.size() >= 3) check_copy(x.transpose(0, -1));  // not the last two: generic path
    }
    const Tensor big = random_of(dt, {6, 40, 34}, seed++);
    check_copy(big.slice(2, 1, 33, 2).transpose(1, 2));  // strides from slicing
    check_copy(big.slice(1, 3, 40, 3).transpose(1, 2));  // an odd row stride
    check_copy(big.permute({1, 2, 0}));                  // batch stride 34, tile stride 1360
    check_copy(big.narrow(0, 2, 3).transpose(0, 2));
    check_copy(big.transpose(1, 2).transpose(0, 1));
  }
}

TEST_CASE("copy_ and to() through transposed layouts match the strided elements", "[core]") {
  const Tensor x = random_of(kFloat32, {37, 23}, 5);
  Tensor dst = zeros({23, 37});
  dst.copy_(x.t());
  CHECK(strided_bytes(dst) == strided_bytes(x.t()));
  Tensor dst_t = zeros({37, 23});
  dst_t.t().copy_(x.t());  // a transposed destination: the generic path
  CHECK(strided_bytes(dst_t) == strided_bytes(x));
  const Tensor widened = x.t().to(kFloat64);  // a conversion: the tile path
  CHECK(strided_bytes(widened.to(kFloat32)) == strided_bytes(x.t()));
  const Tensor counts = x.t().to(kInt64);  // not floating: the generic path
  CHECK(strided_bytes(counts) == strided_bytes(x.t().contiguous().to(kInt64)));
  CHECK(strided_bytes(x.t().clone()) == strided_bytes(x.t()));
}

// The tile path converts each element as the generic loop does: the same bits as a same-dtype
// transpose followed by a contiguous conversion, for every pair of floating dtypes, including
// values that round (float64 to the 16-bit types), overflow to inf, and NaN.
TEST_CASE("transposed conversions between floating dtypes equal transpose then convert", "[core]") {
  const std::vector<DType> floating = {kFloat32, kFloat64, kBFloat16, kFloat16};
  uint64_t seed = 100;
  for (DType from : floating) {
    for (const Shape& s : std::vector<Shape>{{17, 33}, {1, 9}, {0, 4}, {3, 19, 21}, {64, 9}}) {
      Tensor x = mul(random_of(kFloat64, s, seed++), 3e4).to(from);  // some overflow float16
      if (x.numel() > 0) x.view({-1}).narrow(0, 0, 1).fill_(std::nan(""));
      const Tensor view = x.transpose(-1, -2);
      for (DType to : floating) {
        INFO(dtype_name(from) << " -> " << dtype_name(to) << ", shape " << shape_str(s));
        const Tensor converted = view.to(to);
        if (from != to) CHECK(converted.is_contiguous());  // to() of its own dtype is x itself
        CHECK(strided_bytes(converted) == strided_bytes(view.contiguous().to(to)));
      }
    }
  }
  const Tensor batch = random_of(kFloat32, {6, 40, 34}, seed);  // strides from slicing
  const Tensor sliced = batch.slice(2, 1, 33, 2).transpose(1, 2);
  CHECK(strided_bytes(sliced.to(kBFloat16)) == strided_bytes(sliced.contiguous().to(kBFloat16)));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
