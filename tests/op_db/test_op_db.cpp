// The checks generated from the op database, for every entry and every sample:
//   gradcheck and gradgradcheck in float64 (core/gradcheck.h); float32 against float64;
//   the sample's own layout, a contiguous copy and two re-laid copies (strided with NaN in the
//   gaps, and dims stored in reverse order) give bitwise the same output and gradients;
//   1 and 2 threads agree within the entry's tolerance; create_graph works (and matches the
//   plain gradient) or refuses with an AutogradError naming the op; each error input throws
//   its nabla::Error naming the op; each dtype outside the entry's list throws a DTypeError;
//   bfloat16 and float16 inputs give the float32 result within their rounding, or a DTypeError.
// Prints "op_db: N ops, M samples, K failures". NABLA_OP_DB=name,name runs only those entries;
// NABLA_OP_DB_TIMES=1 prints each entry's time.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "tests/op_db/op_db.h"

using namespace nabla;
using namespace nabla::op_db;

// With FMA instructions (the release preset's -march=native) GCC contracts a*b+c
// (-ffp-contract=fast, its default) differently in a vectorised contiguous loop and a scalar
// strided one, so layouts may differ by a few ulps there; without FMA they must match bitwise.
#ifdef __FMA__
constexpr bool kCompilerContractsFma = true;
#else
constexpr bool kCompilerContractsFma = false;
#endif

namespace {

struct Sweep {
  int64_t ops = 0, samples = 0, checks = 0, error_inputs = 0;
  std::vector<std::string> failures;
  std::map<std::string, double> seconds;  // per kind of check (NABLA_OP_DB_TIMES)
};

struct Context {
  Sweep& sweep;
  const OpInfo& op;
  const Sample* sample = nullptr;
  void fail(const std::string& check, const std::string& what) const {
    sweep.failures.push_back(fmt::format("{} [{}] {}: {}", op.name,
                                         sample ? sample->name : std::string("-"), check, what));
  }
  // Runs one check; an exception it did not expect is a failure too.
  template <class F>
  void run(const std::string& check, F&& f) const {
    ++sweep.checks;
    const auto start = std::chrono::steady_clock::now();
    try {
      f();
    } catch (const std::exception& e) {
      fail(check, std::string("threw ") + e.what());
    }
    sweep.seconds[check.substr(0, check.find(' '))] +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

bool supports(const OpInfo& op, DType dt) {
  return std::find(op.dtypes.begin(), op.dtypes.end(), dt) != op.dtypes.end();
}

// The sample's leaves with the data arguments converted to dt (detached; fixed ones as they are).
// Toward int64 or bool, NaN becomes 0 and infinities +-1e6 first: casting them is undefined.
std::vector<Tensor> converted(const Sample& s, DType dt) {
  std::vector<Tensor> out;
  for (const Arg& a : s.args) {
    Tensor x = a.is_data() ? a.leaf.detach() : a.leaf;
    if (a.is_data() && !is_floating(dt)) x = clamp(masked_fill(x, ne(x, x), 0.0), -1e6, 1e6);
    out.push_back(a.is_data() ? x.to(dt) : x);
  }
  return out;
}

// gradcheck sees only the float64 data arguments; the fixed ones are bound here.
DifferentiableFn data_fn(const Sample& s) {
  return [&s](const std::vector<Tensor>& data) {
    std::vector<Tensor> all;
    size_t k = 0;
    for (const Arg& a : s.args) all.push_back(a.is_data() ? data[k++] : a.leaf);
    return s.call(all);
  };
}
std::vector<Tensor> data_leaves(const Sample& s) {
  std::vector<Tensor> out;
  for (const Arg& a : s.args)
    if (a.is_data()) out.push_back(a.leaf);
  return out;
}
bool differentiable(const Sample& s) {
  for (const Arg& a : s.args)
    if (a.is_data() && a.grad) return true;
  return false;
}

// Output and gradients of the op on these views (the differentiated ones become leaves), with a
// fixed output weighting.
struct Result {
  Tensor out;
  std::vector<Tensor> grads;
};
Result evaluate(const Sample& s, std::vector<Tensor> views, bool with_grad) {
  std::vector<Tensor> wrt;
  for (size_t i = 0; i < views.size(); ++i)
    if (with_grad && s.args[i].is_data() && s.args[i].grad) {
      views[i] = views[i].detach().requires_grad_();
      wrt.push_back(views[i]);
    }
  Result r;
  r.out = s.op(views);
  if (!wrt.empty() && r.out.requires_grad() && is_floating(r.out.dtype())) {
    Generator gen(99);
    Tensor w = randn(r.out.shape(), gen, r.out.dtype());
    r.grads = autograd::grad({r.out}, wrt, {w}, false, false, /*allow_unused=*/true);
  }
  r.out = r.out.detach();
  return r;
}

// Equal shapes, dtypes and bits (float32 widens to float64 exactly), except that any NaN equals
// any NaN. Empty string when equal.
std::string bitwise_diff(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return "one is undefined";
  if (!a.defined()) return "";
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return fmt::format("{} {} vs {} {}", shape_str(a.shape()), dtype_name(a.dtype()),
                       shape_str(b.shape()), dtype_name(b.dtype()));
  if (!is_floating(a.dtype())) {
    auto ai = a.to(kInt64).to_vector<int64_t>(), bi = b.to(kInt64).to_vector<int64_t>();
    for (size_t i = 0; i < ai.size(); ++i)
      if (ai[i] != bi[i]) return fmt::format("element {}: {} vs {}", i, ai[i], bi[i]);
    return "";
  }
  auto av = a.to(kFloat64).to_vector<double>(), bv = b.to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < av.size(); ++i) {
    if (std::isnan(av[i]) && std::isnan(bv[i])) continue;
    if (std::memcmp(&av[i], &bv[i], sizeof(double)) != 0)
      return fmt::format("element {}: {:.17g} vs {:.17g}", i, av[i], bv[i]);
  }
  return "";
}

// Max over elements of |a - b| - (atol + rtol |b|) > 0 -> a description; NaN must match NaN.
std::string close_diff(const Tensor& a, const Tensor& b, Tolerance tol) {
  if (a.defined() != b.defined()) return "one is undefined";
  if (!a.defined()) return "";
  if (a.shape() != b.shape())
    return fmt::format("shape {} vs {}", shape_str(a.shape()), shape_str(b.shape()));
  auto av = a.to(kFloat64).to_vector<double>(), bv = b.to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < av.size(); ++i) {
    if (std::isnan(av[i]) || std::isnan(bv[i])) {
      if (std::isnan(av[i]) != std::isnan(bv[i]))
        return fmt::format("element {}: {:.9g} vs {:.9g}", i, av[i], bv[i]);
      continue;
    }
    if (std::isinf(av[i]) || std::isinf(bv[i])) {
      if (av[i] != bv[i]) return fmt::format("element {}: {:.9g} vs {:.9g}", i, av[i], bv[i]);
      continue;
    }
    if (std::abs(av[i] - bv[i]) > tol.atol + tol.rtol * std::abs(bv[i]))
      return fmt::format("element {}: {:.12g} vs {:.12g} (atol {}, rtol {})", i, av[i], bv[i],
                         tol.atol, tol.rtol);
  }
  return "";
}

std::string compare_results(const Result& a, const Result& b, const Tolerance* tol) {
  auto diff = [&](const Tensor& x, const Tensor& y) {
    return tol ? close_diff(x, y, *tol) : bitwise_diff(x, y);
  };
  if (std::string d = diff(a.out, b.out); !d.empty()) return "output " + d;
  if (a.grads.size() != b.grads.size()) return "different number of gradients";
  for (size_t i = 0; i < a.grads.size(); ++i)
    if (std::string d = diff(a.grads[i], b.grads[i]); !d.empty())
      return fmt::format("gradient {} {}", i, d);
  return "";
}

// The same values in a non-contiguous layout: every second element of a buffer whose gaps hold
// NaN (or a sentinel), or the dims stored in reverse order.
Tensor strided_copy(const Tensor& t) {
  if (t.dim() == 0 || t.numel() == 0) return t;
  Shape s = t.shape();
  s[s.size() - 1] *= 2;
  const double gap = is_floating(t.dtype()) ? std::nan("") : t.dtype() == kBool ? 1.0 : -77.0;
  Tensor buf = full(s, gap, t.dtype());
  Tensor v = buf.slice(-1, 0, s[s.size() - 1], 2);
  v.copy_(t.detach());
  return v;
}
Tensor reversed_copy(const Tensor& t) {
  if (t.dim() < 2 || t.numel() == 0) return t;
  std::vector<int64_t> rev;
  for (int64_t d = t.dim() - 1; d >= 0; --d) rev.push_back(d);
  Tensor buf = t.detach().permute(rev).contiguous();
  return buf.permute(rev);  // reversing twice restores the order of dims
}

std::vector<Tensor> views_of(const Sample& s, const std::vector<Tensor>& values) {
  std::vector<Tensor> v;
  for (size_t i = 0; i < values.size(); ++i) v.push_back(s.args[i].view(values[i]));
  return v;
}
template <class F>
std::vector<Tensor> map(const std::vector<Tensor>& ts, F&& f) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(f(t));
  return out;
}

// "ScaledDotProductAttentionBackward" names scaled_dot_product_attention.
bool node_names_op(std::string message, std::string op) {
  auto squash = [](std::string x) {
    std::string out;
    for (char c : x)
      if (c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  return squash(message).find(squash(op)) != std::string::npos;
}

// n threads that all run, whatever the load (adaptive threads would run 2 parts on 1 thread on a
// busy machine, and OpenBLAS's own thread count follows that).
class ThreadCount {
 public:
  explicit ThreadCount(int n) : prev_(num_threads()), adaptive_(adaptive_threads()) {
    set_adaptive_threads(false);
    set_num_threads(n);
  }
  ~ThreadCount() {
    set_num_threads(prev_);
    set_adaptive_threads(adaptive_);
  }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int prev_;
  bool adaptive_;
};

void check_sample(const Context& c, const Sample& s) {
  const OpInfo& op = c.op;
  const bool grad = differentiable(s);
  GradcheckOptions grad_options = op.grad;
  if (s.eps > 0) grad_options.eps = s.eps;
  if (grad && s.gradcheck)
    c.run("gradcheck", [&] {
      auto r = gradcheck(data_fn(s), data_leaves(s), grad_options);
      if (!r.ok) c.fail("gradcheck", r.message);
    });
  if (grad && s.gradcheck && s.gradgradcheck && op.twice_differentiable)
    c.run("gradgradcheck", [&] {
      auto r = gradgradcheck(data_fn(s), data_leaves(s), grad_options);
      if (!r.ok) c.fail("gradgradcheck", r.message);
    });

  if (s.float32 && supports(op, kFloat32))
    c.run("float32", [&] {
      NoGradGuard no_grad;
      Tensor o64 = s.call(converted(s, kFloat64)), o32 = s.call(converted(s, kFloat32));
      if (o32.dtype() != kFloat32)
        return c.fail("float32", fmt::format("output dtype {}", dtype_name(o32.dtype())));
      if (std::string d = close_diff(o32, o64, op.float32); !d.empty()) c.fail("float32", d);
    });

  for (DType dt : {kFloat64, kFloat32}) {
    if (!supports(op, dt)) continue;
    const std::string tag = dtype_name(dt);
    c.run("layouts " + tag, [&] {
      const double scale = dt == kFloat64 ? 1e-8 : 1.0;
      Tolerance tol{op.layouts.atol * scale, op.layouts.rtol * scale};
      bool bitwise = op.layouts.atol == 0 && op.layouts.rtol == 0;
      if (bitwise && kCompilerContractsFma) {
        bitwise = false;
        tol = dt == kFloat64 ? Tolerance{1e-14, 1e-14} : Tolerance{1e-6, 1e-6};
      }
      auto views = views_of(s, converted(s, dt));
      auto contiguous = map(views, [](const Tensor& t) { return t.contiguous(); });
      const Result ref = evaluate(s, contiguous, grad);
      std::vector<std::pair<const char*, std::vector<Tensor>>> variants = {
          {"sample's layout", views}};
      if (op.any_layout) {
        variants.emplace_back("strided copy", map(contiguous, strided_copy));
        variants.emplace_back("reversed-dims copy", map(contiguous, reversed_copy));
      }
      for (const auto& [name, vs] : variants)
        if (std::string d = compare_results(evaluate(s, vs, grad), ref, bitwise ? nullptr : &tol);
            !d.empty())
          c.fail("layouts " + tag, fmt::format("{} vs contiguous: {}", name, d));
    });
    c.run("threads " + tag, [&] {
      const double scale = dt == kFloat64 ? 1e-8 : 1.0;
      const Tolerance tol{op.threads.atol * scale, op.threads.rtol * scale};
      auto views = views_of(s, converted(s, dt));
      Result one, two;
      {
        ThreadCount t(1);
        one = evaluate(s, views, grad);
      }
      {
        ThreadCount t(2);
        two = evaluate(s, views, grad);
      }
      if (std::string d = compare_results(two, one, &tol); !d.empty())
        c.fail("threads " + tag, "2 vs 1 threads: " + d);
    });
  }

  if (grad && !s.big)
    c.run("create_graph", [&] {
      std::vector<Tensor> values = converted(s, kFloat64), wrt;
      for (size_t i = 0; i < values.size(); ++i)
        if (s.args[i].is_data() && s.args[i].grad) {
          values[i].requires_grad_();
          wrt.push_back(values[i]);
        }
      Tensor out = s.call(values);
      if (!out.requires_grad()) return;
      Generator gen(5);
      Tensor w = randn(out.shape(), gen, kFloat64);
      auto plain = autograd::grad({out}, wrt, {w}, true, false, true);
      if (!op.twice_differentiable) {
        try {
          autograd::grad({out}, wrt, {w}, true, /*create_graph=*/true, true);
          c.fail("create_graph", "the entry says once differentiable, but create_graph worked");
        } catch (const AutogradError& e) {
          if (!node_names_op(e.what(), op.name))
            c.fail("create_graph", std::string("refusal does not name the op: ") + e.what());
        }
        return;
      }
      auto graph = autograd::grad({out}, wrt, {w}, true, /*create_graph=*/true, true);
      Tensor total = scalar_tensor(0.0, kFloat64);
      for (size_t i = 0; i < graph.size(); ++i) {
        // The two backward paths round differently, by about eps times the inputs' and the
        // gradient's magnitude: with |q| up to 1e4, a saturated softmax leaves ~1e-12 in one path
        // where the other has 0. The absolute tolerance scales with both.
        double scale = 1.0;
        std::vector<Tensor> magnitudes = values;
        magnitudes.push_back(plain[i]);
        for (const Tensor& t : magnitudes)
          if (t.defined() && t.numel() > 0 && is_floating(t.dtype()))
            scale = std::max(scale, max(abs(t.detach())).to(kFloat64).item());
        if (std::string d = close_diff(graph[i], plain[i], {1e-12 * scale, 1e-9}); !d.empty())
          return c.fail("create_graph", fmt::format("gradient {} differs: {}", i, d));
        if (graph[i].defined() && graph[i].requires_grad())
          total = add(total, sum(mul(graph[i], graph[i])));
      }
      if (total.requires_grad()) autograd::grad({total}, wrt, {}, false, false, true);
    });

  // Every dtype outside the entry's list throws DTypeError naming the op.
  if (!s.big && s.other_dtypes)
    for (DType dt : {kFloat32, kFloat64, kInt64, kBool})
      c.run(std::string("dtype ") + dtype_name(dt), [&] {
        NoGradGuard no_grad;
        const std::string check = std::string("dtype ") + dtype_name(dt);
        if (supports(op, dt)) {
          s.call(converted(s, dt));
          return;
        }
        try {
          s.call(converted(s, dt));
          c.fail(check, "accepted a dtype outside the entry's list");
        } catch (const DTypeError& e) {
          if (!names_op(e.what(), op.name))
            c.fail(check, std::string("message does not name the op: ") + e.what());
        }
      });

  // bfloat16 and float16 (reduced_dtypes.cpp): the float32 result within their rounding, or a
  // DTypeError naming the op.
  if (!s.big && s.float32 && s.other_dtypes)
    for (DType dt : {kBFloat16, kFloat16}) {
      const std::string check = std::string("reduced ") + dtype_name(dt);
      c.run(check, [&] {
        if (std::string d = reduced_dtype_failure(op, s, dt); !d.empty()) c.fail(check, d);
      });
    }
}

void check_errors(const Context& c) {
  for (const ErrorInput& e : c.op.errors ? c.op.errors() : std::vector<ErrorInput>{}) {
    ++c.sweep.error_inputs;
    const std::string check = "error: " + e.name;
    c.run(check, [&] {
      try {
        e.call();
        c.fail(check, "did not throw");
      } catch (const Error& err) {
        const std::string& want = e.names.empty() ? c.op.name : e.names;
        if (!e.has_type(err))
          c.fail(check, fmt::format("threw the wrong type (want {}): {}", e.type_name, err.what()));
        else if (!names_op(err.what(), want))
          c.fail(check, fmt::format("message does not name '{}': {}", want, err.what()));
      }
    });
  }
}

std::set<std::string> selected_ops() {
  std::set<std::string> names;
  if (const char* env = std::getenv("NABLA_OP_DB")) {
    std::stringstream ss(env);
    for (std::string n; std::getline(ss, n, ',');) names.insert(n);
  }
  return names;
}

}  // namespace

TEST_CASE("op_db: generated checks for every op in the table", "[op_db]") {
  Sweep sweep;
  const auto only = selected_ops();
  const auto& table = all_ops();
  for (const OpInfo& op : table) {
    if (!only.empty() && !only.count(op.name)) continue;
    ++sweep.ops;
    const auto start = std::chrono::steady_clock::now();
    reset_seed(op.name);
    Context c{sweep, op};
    std::vector<Sample> samples;
    c.run("samples", [&] { samples = op.samples(); });
    if (samples.empty()) c.fail("samples", "the entry has no samples");
    for (const Sample& s : samples) {
      ++sweep.samples;
      check_sample(Context{sweep, op, &s}, s);
    }
    check_errors(c);
    if (std::getenv("NABLA_OP_DB_TIMES"))
      fmt::print("{:>8.3f} s  {}\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                 op.name);
  }
  if (std::getenv("NABLA_OP_DB_TIMES"))
    for (const auto& [check, seconds] : sweep.seconds)
      fmt::print("{:>8.3f} s  {}\n", seconds, check);
  for (const std::string& f : sweep.failures) fmt::print("FAIL {}\n", f);
  fmt::print("op_db: {} ops, {} samples, {} failures ({} checks, {} of them error inputs)\n",
             sweep.ops, sweep.samples, sweep.failures.size(), sweep.checks, sweep.error_inputs);
  std::fflush(stdout);
  CHECK(sweep.failures.empty());
  CHECK(sweep.samples > 0);
}
