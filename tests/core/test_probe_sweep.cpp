// The probe sweep (issue 17): the classes of input a first fuzzing run found crashes with
// (overflowing numbers, huge and zero dims, wrapped sizes, sizes near 2^62), thrown at every
// factory and every view or tiling op. Each probe must end in a nabla::Error whose message names
// the offending input: not a crash, not UB (the asan preset runs this under UBSan), not
// std::bad_alloc, not a silently wrong tensor. Loaders get the same classes in
// tests/core/test_safetensors.cpp, tests/core/test_checkpoint_integrity.cpp and
// tests/data/test_idx_limits.cpp.
#include <fmt/format.h>

#include <functional>
#include <limits>

#include "nabla/core/allocator.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t k2p62 = int64_t{1} << 62;
constexpr int64_t k2p32 = int64_t{1} << 32;
constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::nan("");

struct Probe {
  std::string call;   // how the probe is written, for the report
  std::string names;  // what the error message must contain
  std::function<void()> run;
};

class Sweep {
 public:
  void add(std::string call, std::string names, std::function<void()> run) {
    probes_.push_back({std::move(call), std::move(names), std::move(run)});
  }
  // Runs every probe; returns the failures, one line each.
  std::vector<std::string> run() const {
    std::vector<std::string> failures;
    for (const Probe& p : probes_) {
      try {
        p.run();
        failures.push_back(p.call + ": accepted (no error)");
      } catch (const Error& e) {
        if (std::string(e.what()).find(p.names) == std::string::npos)
          failures.push_back(
              fmt::format("{}: message \"{}\" does not name {}", p.call, e.what(), p.names));
      } catch (const std::exception& e) {
        failures.push_back(
            fmt::format("{}: escaped as a non-nabla exception: {}", p.call, e.what()));
      }
    }
    return failures;
  }
  size_t size() const { return probes_.size(); }

 private:
  std::vector<Probe> probes_;
};

std::string num(double v) { return fmt::format("{}", v); }

// Shapes past what int64 or memory holds, or invalid: zero beside huge dims, products that wrap,
// sizes near 2^62, negative dims.
const std::vector<Shape>& bad_shapes() {
  static const std::vector<Shape> shapes = {
      {k2p62 - 1},
      {k2p62},
      {kMax},
      {int64_t{1} << 40},
      {0, k2p62, k2p62},
      {k2p62, 4},
      {k2p32, k2p32},
      {2, kMax},
      {3, -2},
      {-1},
      {kMin},
      {k2p32, 0, k2p32, k2p32},
      {1, 1, k2p62 - 1},
      {k2p62 / 8, 1, 8},
      {65536, 65536, 65536, 65536},
  };
  return shapes;
}

// True if a shape could really be allocated here (then it is no probe: it would succeed).
bool allocatable(const Shape& s, DType dt) {
  for (int64_t d : s)
    if (d < 0) return false;
  try {
    const auto n = static_cast<uint64_t>(shape_numel(s));
    (void)contiguous_strides(s);
    return n <= allocator::max_request() / dtype_size(dt);
  } catch (const Error&) {
    return false;
  }
}

void add_factories(Sweep& sweep) {
  for (const Shape& s : bad_shapes()) {
    const std::string shape = shape_str(s);
    for (DType dt : {kFloat32, kFloat64, kInt64, kBool}) {
      if (allocatable(s, dt)) continue;
      const std::string t = fmt::format("{}, {}", shape, dtype_name(dt));
      sweep.add("empty" + t, shape, [=] { empty(s, dt); });
      sweep.add("zeros" + t, shape, [=] { zeros(s, dt); });
      sweep.add("ones" + t, shape, [=] { ones(s, dt); });
      sweep.add("full" + t, shape, [=] { full(s, 2.0, dt); });
      if (is_floating(dt)) {
        sweep.add("rand" + t, shape, [=] { rand(s, dt); });
        sweep.add("randn" + t, shape, [=] { randn(s, dt); });
      }
      if (dt == kInt64) sweep.add("randint" + t, shape, [=] { randint(0, 10, s); });
    }
    sweep.add("from_vector" + shape, shape, [=] { from_vector<double>({1, 2}, s); });
    // The _like factories and copies, from a stride-0 view of that shape where one can exist.
    Tensor big;
    try {
      big = scalar_tensor(1.0).expand(s);
    } catch (const Error&) {
      sweep.add("expand" + shape, shape, [=] { scalar_tensor(1.0).expand(s); });
      continue;
    }
    if (allocatable(s, kFloat32)) continue;
    sweep.add("zeros_like" + shape, shape, [=] { zeros_like(big); });
    sweep.add("ones_like" + shape, shape, [=] { ones_like(big); });
    sweep.add("full_like" + shape, shape, [=] { full_like(big, 3.0); });
    sweep.add("empty_like" + shape, shape, [=] { empty_like(big); });
    sweep.add("rand_like" + shape, shape, [=] { rand_like(big); });
    sweep.add("randn_like" + shape, shape, [=] { randn_like(big); });
    // Without elements the view is contiguous already (as PyTorch), so contiguous() returns it
    // and lays nothing out; with elements it must refuse the layout.
    if (shape_numel(s) != 0) sweep.add("contiguous" + shape, shape, [=] { big.contiguous(); });
    sweep.add("clone" + shape, shape, [=] { big.clone(); });
    sweep.add("to(float64)" + shape, shape, [=] { big.to(kFloat64); });
  }
  // Ranges: overflowing, non-finite and huge counts.
  // (A negative count is an empty range, as before: arange(0, -1e300, 1) has no elements.)
  for (double end : {1e300, kInf, kNaN, 0x1p62, 9.3e18, 1e19})
    sweep.add(fmt::format("arange(0, {}, 1)", end), num(end), [=] { arange(0, end, 1); });
  for (double step : {kNaN, kInf, 0.0, 1e-300})
    sweep.add(fmt::format("arange(0, 1, {})", step), num(step), [=] { arange(0, 1, step); });
  for (double start : {kNaN, -kInf, -1e300})
    sweep.add(fmt::format("arange({}, 1, 1)", start), num(start), [=] { arange(start, 1, 1); });
  sweep.add("arange(-1e300, 1e300, 1e299)", "1e+300", [] { arange(-1e300, 1e300, 1e299); });
  for (int64_t end : {kMax, k2p62 - 1, int64_t{1} << 40})
    sweep.add(fmt::format("arange({})", end),
              end == int64_t{1} << 40 ? "1099511627776" : num(static_cast<double>(end)),
              [=] { arange(end); });
  for (int64_t steps : {k2p62 - 1, kMax, int64_t{1} << 40, int64_t{-1}, kMin})
    sweep.add(fmt::format("linspace(0, 1, {})", steps), std::to_string(steps),
              [=] { linspace(0, 1, steps); });
  for (double v : {1e300, kNaN, kInf, -kInf, 0x1p63, 1e19}) {
    sweep.add(fmt::format("linspace(0, {}, 3, int64)", v), num(v),
              [=] { linspace(0, v, 3, kInt64); });
    sweep.add(fmt::format("full((2,), {}, int64)", v), num(v), [=] { full({2}, v, kInt64); });
    sweep.add(fmt::format("fill_({}) int64", v), num(v), [=] { zeros({2}, kInt64).fill_(v); });
    sweep.add(fmt::format("scalar_tensor({}, int64)", v), num(v),
              [=] { scalar_tensor(v, kInt64); });
  }
  for (auto [lo, hi] : {std::pair{kMax, kMin}, std::pair{int64_t{0}, int64_t{0}},
                        std::pair{kMin, kMin}, std::pair{int64_t{5}, int64_t{-5}}})
    sweep.add(fmt::format("randint({}, {})", lo, hi), std::to_string(lo),
              [=] { randint(lo, hi, {3}); });
}

void add_views(Sweep& sweep) {
  const Tensor x = zeros({4});
  const Tensor m = zeros({3, 4});
  const Tensor wide = zeros({1, 1, 0}).expand({k2p62, k2p62, 0});  // numel 0, dims near 2^62
  const std::vector<Shape> bad_views = {
      {-1, k2p32, k2p32}, {k2p62, k2p62}, {k2p32, k2p32, 0}, {-2},          {-1, -1},
      {kMax, 2},          {kMin},         {0, -1},           {k2p62, 4, -1}};
  for (const Shape& s : bad_views) {
    const std::string shape = shape_str(s);
    sweep.add("view" + shape, shape, [=] { x.view(s); });
    sweep.add("reshape" + shape, shape, [=] { x.reshape(s); });
    sweep.add("unflatten(0, " + shape + ")", shape, [=] { x.unflatten(0, s); });
  }
  // expand's own: -1 and 0 are valid there ((0, -1) gives (0, 1)).
  for (const Shape& s : std::vector<Shape>{{k2p62, k2p62},
                                           {-2},
                                           {-1, -1},
                                           {kMax, 2},
                                           {kMin},
                                           {-1, k2p32, k2p32},
                                           {k2p62, 4, -1},
                                           {3, -5}})
    sweep.add("expand" + shape_str(s), shape_str(s), [=] { zeros({1}).expand(s); });
  for (int64_t d : {kMax, kMin, int64_t{2}, int64_t{-3}}) {
    const std::string v = std::to_string(d);
    sweep.add("size(" + v + ")", v, [=] { m.size(d); });
    sweep.add("stride(" + v + ")", v, [=] { m.stride(d); });
    sweep.add("squeeze(" + v + ")", v, [=] { m.squeeze(d); });
    sweep.add("select(" + v + ", 0)", v, [=] { m.select(d, 0); });
    sweep.add("narrow(" + v + ", 0, 1)", v, [=] { m.narrow(d, 0, 1); });
    sweep.add("slice(" + v + ", 0, 1)", v, [=] { m.slice(d, 0, 1); });
    sweep.add("transpose(" + v + ", 0)", v, [=] { m.transpose(d, 0); });
    sweep.add("permute(" + v + ", 0)", v, [=] { m.permute({d, 0}); });
    sweep.add("flatten(0, " + v + ")", v, [=] { m.flatten(0, d); });
  }
  for (int64_t d : {kMax, kMin, int64_t{3}, int64_t{-4}})
    sweep.add(fmt::format("unsqueeze({})", d), std::to_string(d), [=] { m.unsqueeze(d); });
  for (int64_t i : {kMax, kMin, int64_t{4}, int64_t{-5}})
    sweep.add(fmt::format("select(0, {})", i), std::to_string(i), [=] { x.select(0, i); });
  for (auto [start, length] :
       {std::pair{int64_t{2}, kMax}, std::pair{kMax, int64_t{1}}, std::pair{kMin, int64_t{1}},
        std::pair{int64_t{0}, int64_t{-1}}, std::pair{int64_t{0}, kMin}, std::pair{kMax, kMax},
        std::pair{int64_t{5}, int64_t{0}}, std::pair{int64_t{-5}, int64_t{1}}})
    sweep.add(fmt::format("narrow(0, {}, {})", start, length),
              fmt::format("start {} and length {}", start, length),
              [=] { x.narrow(0, start, length); });
  for (int64_t step : {int64_t{0}, int64_t{-1}, kMin})
    sweep.add(fmt::format("slice(0, 0, 4, {})", step), std::to_string(step),
              [=] { x.slice(0, 0, 4, step); });
  sweep.add("flatten of (2^62, 2^62, 0)", "(4611686018427387904, 4611686018427387904, 0)",
            [=] { wide.flatten(); });
  sweep.add("reshape(-1, 0) of (2^62, 2^62, 0)", "(-1, 0)", [=] { wide.reshape({-1, 0}); });
  sweep.add("permute(0, 0)", "repeated", [=] { m.permute({0, 0}); });
}

// Tiling and window ops in ops/ (cat, repeat, pad, unfold, ...) with the same sizes.
void add_tiling(Sweep& sweep) {
  const Tensor x = zeros({4});
  const Tensor img = zeros({1, 1, 4, 4});
  for (const std::vector<int64_t>& r :
       std::vector<std::vector<int64_t>>{{k2p62, 4}, {kMax}, {-1}, {k2p32, k2p32}, {kMin}}) {
    const std::string s = shape_str(Shape(r.begin(), r.end()));
    sweep.add("repeat" + s, s, [=] { repeat(x, r); });
  }
  for (int64_t r : {kMax, k2p62, int64_t{-1}, kMin})
    sweep.add(fmt::format("repeat_interleave({})", r), std::to_string(r),
              [=] { repeat_interleave(x, r); });
  for (int64_t p : {kMax, kMin, -k2p62})
    sweep.add(fmt::format("pad({{{}, 0}})", p), std::to_string(p), [=] { pad(x, {p, 0}); });
  // A pad that fits int64 but not memory: the allocator names the padded shape.
  sweep.add("pad({2^62, 0})", "(4611686018427387908,)", [=] { pad(x, {k2p62, 0}); });
  for (int64_t n : {int64_t{0}, int64_t{-1}, kMin}) {
    sweep.add(fmt::format("split({})", n), std::to_string(n), [=] { split(x, n); });
    sweep.add(fmt::format("chunk({})", n), std::to_string(n), [=] { chunk(x, n); });
  }
  // (A stride near INT64_MAX is valid: one window.)
  for (int64_t k : {kMax, k2p62, int64_t{0}, int64_t{-1}, kMin}) {
    const std::string v = std::to_string(k);
    sweep.add("unfold kernel " + v, v, [=] { unfold(img, {k, 1}); });
    if (k <= 0) sweep.add("unfold stride " + v, v, [=] { unfold(img, {1, 1}, {k, 1}); });
    if (k != 0) sweep.add("unfold padding " + v, v, [=] { unfold(img, {1, 1}, {1, 1}, {k, 0}); });
    sweep.add("fold output " + v, v, [=] { fold(zeros({1, 1, 16}), {k, 4}, {1, 1}); });
    sweep.add("patchify " + v, v, [=] { patchify(img, k); });
  }
  const int64_t k2p40 = int64_t{1} << 40;  // a kernel whose column matrix has 2^80 rows
  sweep.add("unfold kernel (2^40, 2^40)", "(1099511627776, 1099511627776)", [=] {
    unfold(img, {k2p40, k2p40}, {1, 1}, {k2p40, k2p40});
  });
  sweep.add("cat dim kMax", std::to_string(kMax), [=] { cat({x, x}, kMax); });
  sweep.add("stack dim kMin", std::to_string(kMin), [=] { stack({x, x}, kMin); });
}

// The convolutions and pools (ops/conv.h, ops/pool.h): kernels, strides, paddings, dilations and
// output sizes at the same edges.
void add_conv_pool(Sweep& sweep) {
  const Tensor img = zeros({1, 1, 4, 4});
  const Tensor line = zeros({1, 1, 4}), w1 = zeros({1, 1, 1, 1}), w2 = zeros({1, 1, 2, 1});
  for (int64_t k : {kMax, k2p62, int64_t{0}, int64_t{-1}, kMin}) {
    const std::string v = std::to_string(k);
    if (k <= 0) sweep.add("conv2d stride " + v, v, [=] { conv2d(img, w1, Tensor(), {k, 1}); });
    if (k != 0 && k != k2p62)  // padding 2^62 fits: the output size then fails, by shape
      sweep.add("conv2d padding " + v, v, [=] { conv2d(img, w1, Tensor(), 1, {k, 0}); });
    sweep.add("conv2d dilation " + v, v, [=] { conv2d(img, w2, Tensor(), 1, 0, {k, 1}); });
    sweep.add("conv1d dilation " + v, v, [=] {
      conv1d(line, zeros({1, 1, 2}), Tensor(), 1, 0, k);
    });
    sweep.add("max_pool2d kernel " + v, v, [=] { max_pool2d(img, {k, 1}); });
    sweep.add("max_pool2d dilation " + v, v, [=] { max_pool2d(img, 2, 1, 0, {k, 1}); });
    if (k <= 0) sweep.add("max_pool2d stride " + v, v, [=] { max_pool2d(img, 2, {k, 1}); });
    if (k != 0) sweep.add("avg_pool2d padding " + v, v, [=] { avg_pool2d(img, 2, 1, {k, 0}); });
    sweep.add("avg_pool1d kernel " + v, v, [=] { avg_pool1d(line, k); });
    if (k != 0) sweep.add("adaptive_avg_pool2d " + v, v, [=] { adaptive_avg_pool2d(img, {k, 1}); });
  }
}

}  // namespace

TEST_CASE("probe sweep: every factory, view and tiling op rejects edge sizes by name",
          "[core][probe]") {
  Sweep sweep;
  add_factories(sweep);
  add_views(sweep);
  add_tiling(sweep);
  add_conv_pool(sweep);
  const std::vector<std::string> failures = sweep.run();
  std::string report;
  for (const std::string& f : failures) report += f + "\n";
  INFO(report);
  fmt::print("probe sweep: {} probes, {} failures\n", sweep.size(), failures.size());
  CHECK(sweep.size() > 400);
  CHECK(failures.empty());
}

}  // namespace NABLA_UNITY_ID
}  // namespace
