// The vectorised float32 exp (vec_math::exp_full_range), clamp's loop and the argmax/max passes
// against plain references: exp within 1 ulp of double exp rounded to float on a dense sweep of
// [-104, 89] and on every float near its edges; clamp's NaN and min > max rules; argmax's first
// tie and first NaN on every kind of layout.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

// Ulps between two non-negative floats (+inf counts as the float after FLT_MAX).
int64_t ulps_apart(float a, float b) {
  return std::llabs(static_cast<int64_t>(std::bit_cast<uint32_t>(a)) -
                    static_cast<int64_t>(std::bit_cast<uint32_t>(b)));
}

// The largest ulp distance of exp over the float bit patterns [first, last] taken `stride` apart.
int64_t exp_worst_ulps(uint32_t first, uint32_t last, uint32_t stride, float& worst_x) {
  int64_t worst = 0;
  std::vector<float> xs;
  for (uint64_t bits = first; bits <= last; bits += stride)
    xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  const std::vector<float> ys =
      exp(from_vector(xs, {static_cast<int64_t>(xs.size())})).to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    const auto want = static_cast<float>(std::exp(static_cast<double>(xs[i])));
    const int64_t d = std::isnan(ys[i]) ? int64_t{1} << 40 : ulps_apart(ys[i], want);
    if (d > worst) {
      worst = d;
      worst_x = xs[i];
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("float32 exp is within 1 ulp of the rounded exp from -104 to 89 with inf and denormals",
          "[ops]") {
  const auto bits = [](float f) { return std::bit_cast<uint32_t>(f); };
  // A dense sweep of both signs (every 397th float: 5.6M points), then every float near the top
  // (overflow to inf) and in [-104, -86] (gradual underflow into the denormals, then +0).
  float x_pos = 0, x_neg = 0, x_top = 0, x_bottom = 0;
  const int64_t pos = exp_worst_ulps(0, bits(89.0f), 397, x_pos);
  const int64_t neg = exp_worst_ulps(bits(-0.0f), bits(-104.0f), 397, x_neg);
  const int64_t top = exp_worst_ulps(bits(88.5f), bits(89.0f), 1, x_top);
  const int64_t bottom = exp_worst_ulps(bits(-86.0f), bits(-104.0f), 1, x_bottom);
  INFO("worst at x = " << x_pos << ", " << x_neg << ", " << x_top << ", " << x_bottom);
  CHECK(pos <= 1);
  CHECK(neg <= 1);
  CHECK(top <= 1);
  CHECK(bottom <= 1);

  const float inf = std::numeric_limits<float>::infinity();
  const float ln_max = 88.72283935546875f;  // the float nearest ln(FLT_MAX), just above it
  const std::vector<float> y =
      exp(from_vector(std::vector<float>{NAN, -inf, inf, -0.0f, 0.0f, std::nextafter(ln_max, 0.0f),
                                         ln_max, 100.0f, -103.9f, -104.0f, -200.0f},
                      {11}))
          .to_vector<float>();
  CHECK(std::isnan(y[0]));
  CHECK(y[1] == 0.0f);
  CHECK(y[2] == inf);
  CHECK(y[3] == 1.0f);
  CHECK(y[4] == 1.0f);
  CHECK(y[5] == static_cast<float>(std::exp(double{std::nextafter(ln_max, 0.0f)})));  // finite
  CHECK(y[6] == inf);
  CHECK(y[7] == inf);
  CHECK(y[8] == std::numeric_limits<float>::denorm_min());  // e^-103.9 = 1.09 * 2^-149
  CHECK(y[9] == 0.0f);
  CHECK((y[10] == 0.0f && !std::signbit(y[10])));
}

TEST_CASE("float64 exp stays libm's", "[ops]") {
  for (double v : {-745.0, -700.5, -1.25, 0.0, 1e-300, 0.5, 3.0, 709.0, 710.0}) {
    INFO(v);
    CHECK(std::bit_cast<uint64_t>(exp(tensor({v}, kFloat64)).item<double>()) ==
          std::bit_cast<uint64_t>(std::exp(v)));
  }
}

TEST_CASE("clamp keeps NaN and gives max everywhere when min > max on every layout", "[ops]") {
  const double nan = NAN, inf = INFINITY;
  Tensor x = tensor({{-3.0, nan, 0.25, inf}, {-inf, 2.0, -0.0, 0.75}});
  for (DType dt : {kFloat32, kFloat64}) {
    for (const Tensor& v : {x.to(dt), x.to(dt).t().contiguous().t()}) {
      const std::vector<double> both = clamp(v, -0.5, 0.5).to(kFloat64).to_vector<double>();
      const std::vector<double> want = {-0.5, nan, 0.25, 0.5, -0.5, 0.5, -0.0, 0.5};
      for (size_t i = 0; i < want.size(); ++i) {
        INFO(i);
        CHECK((std::isnan(want[i]) ? std::isnan(both[i]) : both[i] == want[i]));
      }
      const std::vector<double> crossed = clamp(v, 1.0, -1.0).to(kFloat64).to_vector<double>();
      CHECK(std::isnan(crossed[1]));
      for (size_t i : {0, 2, 3, 4, 5, 6, 7}) CHECK(crossed[i] == -1.0);
      const std::vector<double> lo = clamp(v, 0.0, std::nullopt).to(kFloat64).to_vector<double>();
      CHECK(lo[3] == inf);  // no max: +inf stays
      CHECK(lo[4] == 0.0);
      const std::vector<double> hi = clamp(v, std::nullopt, 0.0).to(kFloat64).to_vector<double>();
      CHECK(hi[4] == -inf);  // no min: -inf stays
      CHECK(hi[3] == 0.0);
    }
  }
  Tensor ints = tensor({-9, 4, 7, std::numeric_limits<int32_t>::min()}, kInt64);
  CHECK(clamp(ints, -5.0, 5.0).to_vector<int64_t>() == std::vector<int64_t>{-5, 4, 5, -5});
  CHECK(clamp(ints, std::nullopt, 5.0).to_vector<int64_t>() ==
        std::vector<int64_t>{-9, 4, 5, std::numeric_limits<int32_t>::min()});
  CHECK(clamp(ints, 6.0, 5.0).to_vector<int64_t>() == std::vector<int64_t>{5, 5, 5, 5});
}

namespace {

// PyTorch's argmax/argmin along a dim, one output at a time: the first NaN, else the first of
// the tied extremes.
template <class T>
std::vector<int64_t> reference_arg(const Tensor& x, int64_t dim, bool is_max) {
  const Tensor c = x.contiguous();
  const T* p = c.data_ptr<T>();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t n = x.size(dim);
  const auto is_nan = [](T v) {
    if constexpr (std::is_floating_point_v<T>) {
      return std::isnan(v);
    } else {
      return false;
    }
  };
  std::vector<int64_t> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t k = 0; k < n; ++k) {
        const T v = p[(o * n + k) * inner + i], b = p[(o * n + best) * inner + i];
        if (is_nan(b)) break;
        if (is_nan(v) || (is_max ? v > b : v < b)) best = k;
        if (is_nan(v)) break;
      }
      out.push_back(best);
    }
  return out;
}

}  // namespace

TEST_CASE("argmax argmin max and min along a dim take the first tie and the first NaN", "[ops]") {
  Generator g(3);
  const std::vector<Shape> shapes = {{900, 37}, {37, 130}, {5, 70, 3}, {4, 33, 65},
                                     {1, 1},    {2, 31},   {64, 2},    {3, 1, 200}};
  for (const Shape& s : shapes) {
    // Small integers: ties everywhere; then NaNs and -inf rows in one copy.
    Tensor ties = sub(randint(0, 6, s, g).to(kFloat32), 3.0);
    Tensor odd = ties.clone();
    float* p = odd.data_ptr<float>();
    for (int64_t i = 0; i < odd.numel(); i += 7 + i % 13) p[i] = i % 3 ? NAN : -INFINITY;
    for (int64_t i = 0; i < std::min<int64_t>(s.back(), odd.numel()); ++i) p[i] = -INFINITY;
    for (const Tensor& x : {ties, odd, ties.to(kFloat64), odd.to(kFloat64), ties.to(kInt64)}) {
      for (int64_t dim = 0; dim < x.dim(); ++dim) {
        INFO("shape " << shape_str(s) << ", dtype " << dtype_name(x.dtype()) << ", dim " << dim);
        dispatch_numeric(x.dtype(), "test", [&](auto tag) {
          using T = decltype(tag);
          CHECK(argmax(x, dim).to_vector<int64_t>() == reference_arg<T>(x, dim, true));
          CHECK(argmin(x, dim).to_vector<int64_t>() == reference_arg<T>(x, dim, false));
          const ValuesIndices m = max(x, dim);
          CHECK(test::bit_equal(m.values, gather(x, dim, m.indices.unsqueeze(dim)).squeeze(dim)));
        });
      }
    }
    CHECK(argmax(odd).item<int64_t>() == reference_arg<float>(odd.reshape({-1}), 0, true)[0]);
    CHECK(argmin(ties).item<int64_t>() == reference_arg<float>(ties.reshape({-1}), 0, false)[0]);
  }
  // -0.0 and 0.0 tie: the first one is the answer, with its sign.
  const ValuesIndices z = max(tensor({{-0.0, 0.0, -1.0}}), 1);
  CHECK(z.indices.item<int64_t>() == 0);
  CHECK(std::signbit(z.values.item<float>()));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
