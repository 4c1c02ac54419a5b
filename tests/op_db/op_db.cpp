// The op database's shared parts: argument makers, the standard sample sets every elementwise
// op gets, and the table assembled from the family files.
#include "tests/op_db/op_db.h"

#include <fmt/format.h>

namespace nabla::op_db {
namespace {
uint64_t g_seed = 0;

Shape leaf_shape(const Shape& shape, Layout layout) {
  Shape s = shape;
  if (layout == Layout::Transposed) std::swap(s[s.size() - 1], s[s.size() - 2]);
  if (layout == Layout::Strided) s[s.size() - 1] *= 2;
  return s;
}

// Uniform in [lo, hi], rounded to float32, as a float64 leaf that requires grad.
Tensor draw(const Shape& shape, Dist d) {
  Generator gen(1000 + g_seed++);
  Tensor u = rand(shape, gen, kFloat64);
  return add(mul(u, d.hi - d.lo), d.lo).to(kFloat32).to(kFloat64).requires_grad_();
}
}  // namespace

Tensor Arg::view(const Tensor& value) const {
  switch (layout) {
    case Layout::Plain:
      return value;
    case Layout::Transposed:
      return value.transpose(-1, -2);
    case Layout::Strided:
      return value.slice(-1, 0, value.size(-1), 2);
    case Layout::Expanded:
      return value.expand(shape);
  }
  return value;
}

OpFn unary_fn(Tensor (*f)(const Tensor&)) {
  return [f](const std::vector<Tensor>& v) { return f(v[0]); };
}
OpFn binary_fn(Tensor (*f)(const Tensor&, const Tensor&)) {
  return [f](const std::vector<Tensor>& v) { return f(v[0], v[1]); };
}

Tensor Sample::call(const std::vector<Tensor>& values) const {
  std::vector<Tensor> views;
  for (size_t i = 0; i < args.size(); ++i) views.push_back(args[i].view(values[i]));
  return op(views);
}

// FNV-1a of the entry's name: its samples keep their values when entries are added or moved.
void reset_seed(std::string_view op_name) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : op_name) h = (h ^ c) * 1099511628211ull;
  g_seed = h;
}

OpInfo entry(const std::string& name, std::function<std::vector<Sample>()> samples,
             std::function<std::vector<ErrorInput>()> errors) {
  OpInfo op;
  op.name = name;
  op.samples = std::move(samples);
  op.errors = std::move(errors);
  return op;
}

Arg arg(const Shape& shape, Dist d, Layout layout) {
  if (layout == Layout::Transposed && shape.size() < 2)
    throw ValueError("op_db: a transposed argument needs 2 dims");
  if (layout == Layout::Strided && shape.empty())
    throw ValueError("op_db: a strided argument needs a dim");
  return {draw(leaf_shape(shape, layout), d), layout, shape, true};
}
Arg transposed(const Shape& shape, Dist d) { return arg(shape, d, Layout::Transposed); }
Arg strided(const Shape& shape, Dist d) { return arg(shape, d, Layout::Strided); }
Arg expanded(const Shape& base, const Shape& shape, Dist d) {
  return {draw(base, d), Layout::Expanded, shape, true};
}
Arg values(const Shape& shape, const std::vector<double>& v) {
  Tensor t = from_vector(v, shape).to(kFloat32).to(kFloat64).requires_grad_();
  return {t, Layout::Plain, shape, true};
}
Arg fixed(const Tensor& t) { return {t, Layout::Plain, t.shape(), false}; }
Arg no_grad(Arg a) {
  a.leaf = a.leaf.detach();
  a.grad = false;
  return a;
}
Tensor indices(const Shape& shape, int64_t high) {
  Generator gen(2000 + g_seed++);
  return randint(0, high, shape, gen);
}
Tensor bool_mask(const Shape& shape) {
  Generator gen(3000 + g_seed++);
  return gt(rand(shape, gen, kFloat64), 0.4);
}
Tensor idx(std::vector<int64_t> v, const Shape& shape) { return from_vector(v, shape); }

Sample sample(std::string name, std::vector<Arg> args, OpFn op) {
  Sample s;
  s.name = std::move(name);
  s.args = std::move(args);
  s.op = std::move(op);
  return s;
}
OpFn on_first(std::function<Tensor(const Tensor&)> f) {
  return [f](const std::vector<Tensor>& v) { return f(v[0]); };
}
Sample at(const std::string& what, const std::vector<double>& v, const OpFn& fn) {
  return sample(what, {values({static_cast<int64_t>(v.size())}, v)}, fn);
}
Sample edge(const std::string& what, const std::vector<double>& v, const OpFn& fn) {
  return forward_only(at("edge: " + what, v, fn));
}
bool names_op(const std::string& message, std::string op) {
  const std::string suffix = "_composite";
  if (op.size() > suffix.size() && op.ends_with(suffix)) op.resize(op.size() - suffix.size());
  return message.find(op) != std::string::npos;
}
void append(std::vector<Sample>& to, std::vector<Sample> more) {
  for (Sample& s : more) to.push_back(std::move(s));
}
Sample forward_only(Sample s) {
  s.gradcheck = false;
  s.gradgradcheck = false;
  return s;
}
Sample big(Sample s) {
  s.big = true;
  s.gradcheck = false;
  s.gradgradcheck = false;
  return s;
}

Sample large(Sample s) {
  s.eps = 1e-3;
  return s;
}
std::vector<Sample> without_big(std::vector<Sample> s) {
  std::erase_if(s, [](const Sample& x) { return x.big; });
  return s;
}
Sample float_only(Sample s) {
  s.other_dtypes = false;
  return s;
}

// 264 x 512 elements: over parallel_grain() (core/parallel.h) even at cost 1 per element.
static const Shape kBig{264, 512};

std::vector<Sample> unary_samples(const OpFn& op, Dist d, bool large) {
  std::vector<Sample> s = {
      sample("0-d", {arg({}, d)}, op),
      sample("size-1 (1)", {arg({1}, d)}, op),
      sample("size-0 (0, 3)", {arg({0, 3}, d)}, op),
      sample("2-D (2, 3)", {arg({2, 3}, d)}, op),
      sample("transposed (3, 4)", {transposed({3, 4}, d)}, op),
      sample("strided (2, 3)", {strided({2, 3}, d)}, op),
      sample("expanded (3, 1) -> (3, 4)", {expanded({3, 1}, {3, 4}, d)}, op),
      sample("3-D (2, 3, 4)", {arg({2, 3, 4}, d)}, op),
      sample("4-D (2, 1, 3, 2)", {arg({2, 1, 3, 2}, d)}, op),
      big(sample("big (264, 512)", {arg(kBig, d)}, op)),
  };
  if (large)
    s.push_back(op_db::large(sample("large |x| <= 1e4 (4, 3)", {arg({4, 3}, kLarge)}, op)));
  return s;
}

std::vector<Sample> binary_samples(const OpFn& op, Dist a, Dist b, bool large) {
  std::vector<Sample> s = {
      sample("same shape (2, 3)", {arg({2, 3}, a), arg({2, 3}, b)}, op),
      sample("broadcast (3, 1) x (1, 4)", {arg({3, 1}, a), arg({1, 4}, b)}, op),
      sample("broadcast (4) x (2, 3, 4)", {arg({4}, a), arg({2, 3, 4}, b)}, op),
      sample("broadcast (2, 3, 4) x (3, 1)", {arg({2, 3, 4}, a), arg({3, 1}, b)}, op),
      sample("0-d x (2, 3)", {arg({}, a), arg({2, 3}, b)}, op),
      sample("(2, 3) x 0-d", {arg({2, 3}, a), arg({}, b)}, op),
      sample("0-d x 0-d", {arg({}, a), arg({}, b)}, op),
      sample("size-1 (1) x (1)", {arg({1}, a), arg({1}, b)}, op),
      sample("size-0 (0, 3) x (3)", {arg({0, 3}, a), arg({3}, b)}, op),
      sample("size-0 broadcast (2, 0) x (1)", {arg({2, 0}, a), arg({1}, b)}, op),
      sample("transposed (3, 4) x (3, 4)", {transposed({3, 4}, a), arg({3, 4}, b)}, op),
      sample("(3, 4) x strided (3, 4)", {arg({3, 4}, a), strided({3, 4}, b)}, op),
      sample("expanded (3, 1) -> (3, 4) x transposed (3, 4)",
             {expanded({3, 1}, {3, 4}, a), transposed({3, 4}, b)}, op),
      sample("4-D (2, 1, 3, 2) x (1, 2, 1, 2)", {arg({2, 1, 3, 2}, a), arg({1, 2, 1, 2}, b)}, op),
      big(sample("big (264, 512) x (512)", {arg(kBig, a), arg({512}, b)}, op)),
      big(sample("big transposed (264, 512) x (264, 512)", {transposed(kBig, a), arg(kBig, b)},
                 op)),
  };
  if (large) {
    Dist la{a.lo * 5e3, a.hi * 5e3}, lb{b.lo * 5e3, b.hi * 5e3};
    s.push_back(op_db::large(
        sample("large |x| ~ 1e4 (4, 3) x (4, 3)", {arg({4, 3}, la), arg({4, 3}, lb)}, op)));
  }
  return s;
}

const std::vector<OpInfo>& all_ops() {
  static const std::vector<OpInfo> table = [] {
    std::vector<OpInfo> t;
    for (auto family : {unary_ops, binary_ops, reduction_ops, softmax_ops, loss_ops, shape_ops,
                        view_ops, nn_ops, indexing_ops, conv_attention_ops, conv_ops, pool_ops,
                        norm_ops, pointwise_more_ops, shape_more_ops, linalg_more_ops, sort_ops})
      for (OpInfo& op : family()) t.push_back(std::move(op));
    return t;
  }();
  return table;
}

}  // namespace nabla::op_db
