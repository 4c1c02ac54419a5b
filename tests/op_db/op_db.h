// The op database: PyTorch's OpInfo pattern (torch/testing/_internal/common_methods_invocations.py)
// for nabla. One entry per public differentiable op, with its sample inputs, error inputs, dtypes,
// tolerances and flags; test_op_db.cpp generates every check from the table, and
// test_completeness.cpp fails when an op exported from nabla.h has no entry.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "nabla/nabla.h"

namespace nabla::op_db {

// How the op sees one argument. The sample keeps a contiguous leaf and the view is taken inside
// the function, so gradients flow back through the view, and gradcheck (which refuses inputs
// whose elements overlap) can still perturb an expanded argument.
enum class Layout {
  Plain,       // the leaf itself
  Transposed,  // the leaf holds the last two dims swapped; the op sees leaf.transpose(-1, -2)
  Strided,     // the leaf's last dim is twice as long; the op sees every second element
  Expanded,    // the leaf has size-1 dims; the op sees it expanded (stride 0) to `shape`
};

struct Arg {
  Tensor leaf;  // float64 data (differentiated, perturbed by gradcheck) or a fixed argument
  Layout layout = Layout::Plain;
  Shape shape;       // the shape the op sees
  bool grad = true;  // floating leaves only: differentiated by the checks
  // `value` (the leaf or a converted copy of it) in this argument's layout.
  Tensor view(const Tensor& value) const;
  bool is_data() const { return is_floating(leaf.dtype()); }
};

// The op under test, called on the sample's arguments (in their layouts) with the op's other
// arguments bound: [](const std::vector<Tensor>& v) { return softmax(v[0], -1); }.
using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;
OpFn unary_fn(Tensor (*f)(const Tensor&));                  // f(v[0])
OpFn binary_fn(Tensor (*f)(const Tensor&, const Tensor&));  // f(v[0], v[1])

struct Sample {
  std::string name{};  // what the case covers: "broadcast (3, 1) x (4)", "edge: x = 0", ...
  std::vector<Arg> args{};
  OpFn op{};                  // the op with its other arguments bound, on the args' views
  bool gradcheck = true;      // false: forward-only (a kink or a pole: the derivative is a
                              // convention finite differences cannot see)
  bool gradgradcheck = true;  // false: the second derivative is not smooth at this point
  bool float32 = true;        // false: float32 cannot hold the case (it overflows, or a rounding
                              // the sample's name explains)
  bool big = false;           // crosses the parallel grain: forward and one backward only
  double eps = 0;             // gradcheck's step when not the entry's (large magnitudes)
  bool other_dtypes = true;   // false: the sample's arguments are float-only (a -inf fill, a
                              // fractional bound), so the int64/bool sweep skips it
  Tensor call(const std::vector<Tensor>& values) const;  // op on the values in the args' layouts
};

struct ErrorInput {
  std::string name;            // what is wrong
  std::function<void()> call;  // must throw
  std::function<bool(const Error&)> has_type;
  std::string type_name;
  std::string names;  // the message must contain this; empty = the op's name
};

template <class E>
constexpr const char* error_type_name() {
  if constexpr (std::is_same_v<E, ShapeError>) return "ShapeError";
  if constexpr (std::is_same_v<E, DTypeError>) return "DTypeError";
  if constexpr (std::is_same_v<E, ValueError>) return "ValueError";
  if constexpr (std::is_same_v<E, IndexError>) return "IndexError";
  if constexpr (std::is_same_v<E, AutogradError>) return "AutogradError";
  return "nabla::Error";
}

// An error input that must throw E (or a subclass).
template <class E>
ErrorInput expect(std::string name, std::function<void()> call, std::string names = "") {
  return {std::move(name), std::move(call),
          [](const Error& e) { return dynamic_cast<const E*>(&e) != nullptr; },
          error_type_name<E>(), std::move(names)};
}

struct Tolerance {
  double atol;
  double rtol;
};

// Ops whose float32 products run on a GEMM that picks its kernel per transpose flag (oneDNN's
// sgemm, where the machine profile sends float32 products there: core/machine.h; OpenBLAS for
// batched ones): a layout changes the order of the sums, within 256 eps.
inline const Tolerance kGemmLayouts{3e-5, 1e-5};
inline const char* const kGemmLayoutsNote =
    "GEMM kernels may differ per transpose flag: layouts agree within 256 eps (float32)";

// One entry per op. Every member has a default, so an entry names only what differs, with C++20
// designated initializers in this order (docs/adding-an-op.md, "The op database entry"):
//   t.push_back({.name = "tanh", .samples = [] { ... }, .errors = [] { ... }});
struct OpInfo {
  std::string name{};  // as exported: a free function of ops/*.h or a Tensor method
  std::function<std::vector<Sample>()> samples{};     // at least one; see the sample sets below
  std::function<std::vector<ErrorInput>()> errors{};  // each must throw its nabla::Error
  // Dtypes of the data arguments the op accepts; any other must throw DTypeError naming the op.
  std::vector<DType> dtypes = {kFloat32, kFloat64};
  Tolerance float32{1e-5, 1e-4};  // float32 result against float64
  Tolerance threads{0, 0};        // 1 vs 2 threads, float32 (float64: scaled by 1e-8)
  Tolerance layouts{0, 0};        // non-contiguous vs contiguous, float32 (float64: scaled by
                                  // 1e-8); 0 = bitwise
  GradcheckOptions grad{};
  bool twice_differentiable = true;  // false: create_graph must refuse with an AutogradError
  bool any_layout = true;  // false: the op needs compatible strides (view), so the layout check
                           // compares the sample's own layout with a contiguous copy only
  std::string note{};      // why a flag or tolerance differs from the default
};

// --- argument makers ------------------------------------------------------------------------
// Values are drawn uniformly in [lo, hi] and rounded to float32, so the float32 run sees exactly
// the float64 inputs and the comparison measures the op, not the input rounding.
struct Dist {
  double lo = -2.0;
  double hi = 2.0;
};
inline constexpr Dist kPositive{0.2, 3.0};
inline constexpr Dist kLarge{-1e4, 1e4};

void reset_seed(std::string_view op_name);  // before an entry's samples: values reproducible
Arg arg(const Shape& shape, Dist d = {}, Layout layout = Layout::Plain);
Arg transposed(const Shape& shape, Dist d = {});  // shape is what the op sees
Arg strided(const Shape& shape, Dist d = {});
Arg expanded(const Shape& base, const Shape& shape, Dist d = {});
Arg values(const Shape& shape, const std::vector<double>& v);  // exact values (domain edges)
Arg fixed(const Tensor& t);  // an argument the checks do not differentiate (indices, masks)
Arg no_grad(Arg a);          // a floating argument that is not differentiated
Tensor indices(const Shape& shape, int64_t high);  // int64 in [0, high)
Tensor bool_mask(const Shape& shape);
Tensor idx(std::vector<int64_t> v, const Shape& shape);  // int64 indices with these values
inline const std::vector<DType> kAllDTypes = {kFloat32, kFloat64, kInt64, kBool};

// --- standard sample sets -------------------------------------------------------------------
// 0-d, size-1, size-0, 2-D, transposed, strided, expanded (stride 0), 3-D, 4-D, and a big
// input (over the parallel grain). `large`: also values of magnitude up to 1e4 (kLarge).
std::vector<Sample> unary_samples(const OpFn& op, Dist d = {}, bool large = true);
// Same shapes, plus broadcast pairs both ways, 0-d with N-D, and a transposed or expanded operand.
std::vector<Sample> binary_samples(const OpFn& op, Dist a = {}, Dist b = {}, bool large = true);
Sample sample(std::string name, std::vector<Arg> args, OpFn op);
OpFn on_first(std::function<Tensor(const Tensor&)> f);  // f applied to the first argument
// A sample over the exact 1-D values v; `edge`: at the edge of the domain, forward only.
Sample at(const std::string& what, const std::vector<double>& v, const OpFn& fn);
Sample edge(const std::string& what, const std::vector<double>& v, const OpFn& fn);
void append(std::vector<Sample>& to, std::vector<Sample> more);
// An entry with the default flags and dtypes (float32, float64).
OpInfo entry(const std::string& name, std::function<std::vector<Sample>()> samples,
             std::function<std::vector<ErrorInput>()> errors);
Sample forward_only(Sample s);  // gradcheck off (a kink or pole); name says why
Sample big(Sample s);
// The same samples without the big ones: an op's second and later variants (another exponent,
// approximation or reduction) run through the same parallel kernels, so one big sample is enough.
std::vector<Sample> without_big(std::vector<Sample> s);
Sample float_only(Sample s);
Sample large(Sample s);  // values near 1e4: a finite-difference step of 1e-3 (relative 1e-7)

// --- the table, by family (each file under tests/op_db/) --------------------------------------
std::vector<OpInfo> unary_ops();           // ops_unary.cpp: unary.h, pointwise math, activation.h
std::vector<OpInfo> binary_ops();          // ops_binary.cpp: arithmetic.h, clamp, where, max/min
std::vector<OpInfo> reduction_ops();       // ops_reduce.cpp: reduce.h, reduce_dim.h, statistics.h
std::vector<OpInfo> softmax_ops();         // ops_softmax.cpp: softmax.h
std::vector<OpInfo> loss_ops();            // ops_loss.cpp: loss.h
std::vector<OpInfo> shape_ops();           // ops_shape.cpp: shape.h
std::vector<OpInfo> view_ops();            // ops_views.cpp: Tensor views and conversions
std::vector<OpInfo> nn_ops();              // ops_nn.cpp: linalg, linear, layer_norm, dropout
std::vector<OpInfo> indexing_ops();        // ops_indexing.cpp: embedding.h, indexing.h
std::vector<OpInfo> pointwise_more_ops();  // ops_pointwise_more.cpp: activation_more.h,
                                           // rounding.h, lerp and atan2
std::vector<OpInfo> conv_attention_ops();  // ops_conv_attention.cpp: patches.h, attention.h
std::vector<OpInfo> conv_ops();            // ops_conv.cpp: conv.h
std::vector<OpInfo> pool_ops();            // ops_pool.cpp: pool.h
std::vector<OpInfo> norm_ops();            // ops_norms.cpp: norms.h
std::vector<OpInfo> shape_more_ops();      // ops_shape_more.cpp: shape_more.h, reduce_more.h,
                                           // scatter.h
std::vector<OpInfo> linalg_more_ops();     // ops_linalg_more.cpp: linalg_more.h, einsum.h,
                                           // interpolate.h
std::vector<OpInfo> sort_ops();            // ops_sort.cpp: sort.h, sampling.h's filters
const std::vector<OpInfo>& all_ops();
// Whether an error message names the op; a composite twin may be named by its fused op
// ("softmax: ..." for softmax_composite): the message still points at the function called.
bool names_op(const std::string& message, std::string op);

// The bfloat16 / float16 check of one sample (reduced_dtypes.cpp): "" or what failed.
std::string reduced_dtype_failure(const OpInfo& op, const Sample& s, DType dt);

}  // namespace nabla::op_db
