// einsum, read as a sequence of ordinary ops (so every gradient, and gradient of gradient, comes
// from those ops):
//   1. parse: each operand gets one label per dim; "..." becomes labels kEllipsis + k, aligned
//      from the right across operands so they broadcast like the batch dims of matmul;
//   2. a label repeated inside one operand takes the diagonal: multiply by an identity mask over
//      the two dims and sum one of them;
//   3. a label found in one operand only and not in the output is summed out at once;
//   4. operands are contracted left to right, two at a time. For A and B, a label that is
//        in both and still needed later (output or a later operand)   -> batch dim  (b)
//        in both and needed nowhere else                              -> contracted (k)
//        in A only / in B only                                        -> rows (m) / columns (n)
//      A is permuted to (b..., m..., k...) and reshaped to (b..., M, K), B to (b..., K, N), one
//      matmul (ops/gemm.cpp) gives (b..., M, N), reshaped back to (b..., m..., n...);
//   5. what is left is summed over labels not in the output and permuted into output order.
// This is the strategy of torch.einsum without its contraction-order optimisation (opt_einsum):
// left to right is the order written.
#include "nabla/ops/einsum.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>

#include "nabla/core/error.h"
#include "nabla/core/inspect/instrument.h"
#include "nabla/ops/arithmetic.h"
#include "nabla/ops/compare.h"
#include "nabla/ops/linalg.h"
#include "nabla/ops/reduce.h"

namespace nabla {
namespace {

constexpr int kEllipsis = 256;  // labels of "..." dims: kEllipsis + k; letters are their char
using Labels = std::vector<int>;

struct Term {
  Tensor t;
  Labels labels;  // one per dim of t
};

bool contains(const Labels& l, int label) {
  return std::find(l.begin(), l.end(), label) != l.end();
}

int64_t position(const Labels& l, int label) {
  return static_cast<int64_t>(std::find(l.begin(), l.end(), label) - l.begin());
}

// Sums t over the dims whose label fails `keep`.
Term sum_out(Term term, const std::function<bool(int)>& keep) {
  std::vector<int64_t> dims;
  Labels kept;
  for (size_t i = 0; i < term.labels.size(); ++i) {
    if (keep(term.labels[i]))
      kept.push_back(term.labels[i]);
    else
      dims.push_back(static_cast<int64_t>(i));
  }
  if (dims.empty()) return term;
  return {sum(term.t, dims), kept};
}

// Step 2: the diagonal over each repeated label.
Term take_diagonals(Term term) {
  for (size_t q = 0; q < term.labels.size(); ++q) {
    const auto p = static_cast<size_t>(position(term.labels, term.labels[q]));
    if (p == q) continue;
    const int64_t n = term.t.size(static_cast<int64_t>(p));
    if (term.t.size(static_cast<int64_t>(q)) != n)
      throw ShapeError(
          fmt::format("einsum: label '{}' repeats in an operand of shape {} over dims "
                      "of different sizes ({} and {})",
                      static_cast<char>(term.labels[q]), shape_str(term.t.shape()), n,
                      term.t.size(static_cast<int64_t>(q))));
    Shape row(term.labels.size(), 1), col(term.labels.size(), 1);
    row[p] = n;
    col[q] = n;
    const Tensor identity = eq(arange(n).view(row), arange(n).view(col)).to(term.t.dtype());
    term.t = sum(mul(term.t, identity), {static_cast<int64_t>(q)});
    term.labels.erase(term.labels.begin() + static_cast<int64_t>(q));
    return take_diagonals(std::move(term));
  }
  return term;
}

// Step 4: contracts a and b; `needed` holds the labels used after this pair.
Term contract(Term a, Term b, const Labels& needed) {
  auto needed_or_in = [&](const Labels& other) {
    return [&](int l) { return contains(needed, l) || contains(other, l); };
  };
  a = sum_out(std::move(a), needed_or_in(b.labels));
  b = sum_out(std::move(b), needed_or_in(a.labels));
  Labels batch, m, k, n;
  for (int l : a.labels)
    (contains(b.labels, l) ? (contains(needed, l) ? batch : k) : m).push_back(l);
  for (int l : b.labels)
    if (!contains(a.labels, l)) n.push_back(l);
  // Shared labels: a size-1 side is expanded to the other's size (matmul needs equal K).
  Shape a_size = a.t.shape(), b_size = b.t.shape();
  for (int l : k) {
    int64_t& sa = a_size[static_cast<size_t>(position(a.labels, l))];
    int64_t& sb = b_size[static_cast<size_t>(position(b.labels, l))];
    sa = sb = std::max(sa, sb);
  }
  const Tensor ta = a.t.expand(a_size), tb = b.t.expand(b_size);
  auto permuted = [](const Term& t, const Tensor& v, std::initializer_list<const Labels*> groups) {
    std::vector<int64_t> perm;
    for (const Labels* g : groups)
      for (int l : *g) perm.push_back(position(t.labels, l));
    return v.permute(perm);
  };
  auto sizes = [](const Tensor& v, size_t from, size_t count) {
    return Shape(v.shape().begin() + static_cast<int64_t>(from),
                 v.shape().begin() + static_cast<int64_t>(from + count));
  };
  const Tensor pa = permuted(a, ta, {&batch, &m, &k}), pb = permuted(b, tb, {&batch, &k, &n});
  Shape a_flat = sizes(pa, 0, batch.size()), b_flat = sizes(pb, 0, batch.size());
  const Shape m_sizes = sizes(pa, batch.size(), m.size());
  const Shape n_sizes = sizes(pb, batch.size() + k.size(), n.size());
  const int64_t kk = shape_numel(sizes(pa, batch.size() + m.size(), k.size()));
  a_flat.insert(a_flat.end(), {shape_numel(m_sizes), kk});
  b_flat.insert(b_flat.end(), {kk, shape_numel(n_sizes)});
  const Tensor product = matmul(pa.reshape(a_flat), pb.reshape(b_flat));
  Shape out(product.shape().begin(), product.shape().end() - 2);
  out.insert(out.end(), m_sizes.begin(), m_sizes.end());
  out.insert(out.end(), n_sizes.begin(), n_sizes.end());
  Labels labels = batch;
  labels.insert(labels.end(), m.begin(), m.end());
  labels.insert(labels.end(), n.begin(), n.end());
  return {product.reshape(out), labels};
}

// Step 1: labels of one side of the equation; `ellipsis_dims` dims for "..." (or -1: not yet
// known, for the output).
Labels parse_term(const std::string& eq, const std::string& term, int64_t ndim, size_t operand,
                  int64_t max_ellipsis, bool* has_ellipsis) {
  Labels labels;
  int64_t letters = 0;
  for (char c : term) letters += std::isalpha(static_cast<unsigned char>(c)) ? 1 : 0;
  const size_t dots = term.find("...");
  *has_ellipsis = dots != std::string::npos;
  const std::string what =
      ndim < 0 ? std::string("the output") : fmt::format("operand {}", operand);
  if (*has_ellipsis && term.find("...", dots + 3) != std::string::npos)
    throw ValueError(fmt::format("einsum: '{}': {} has more than one '...'", eq, what));
  for (size_t i = 0; i < term.size(); ++i)
    if (!std::isalpha(static_cast<unsigned char>(term[i])) &&
        !(i >= dots && i < dots + 3 && *has_ellipsis))
      throw ValueError(
          fmt::format("einsum: '{}': invalid character '{}' in {}; expected letters and '...'", eq,
                      term[i], what));
  const int64_t e = ndim < 0 ? max_ellipsis : ndim - letters;
  if (ndim >= 0 && (e < 0 || (!*has_ellipsis && e != 0)))
    throw ShapeError(
        fmt::format("einsum: '{}': operand {} has {} dims but its subscripts '{}' "
                    "name {}",
                    eq, operand, ndim, term, letters));
  for (size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    if (i == dots) {
      for (int64_t j = 0; j < e; ++j)
        labels.push_back(kEllipsis + static_cast<int>(max_ellipsis - e + j));
      i += 2;
    } else {
      labels.push_back(c);
    }
  }
  return labels;
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  inspect::OpScope op_scope("einsum", operands);
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq += c;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms(1);
  for (char c : lhs) {
    if (c == ',')
      terms.emplace_back();
    else
      terms.back().push_back(c);
  }
  if (terms.size() != operands.size())
    throw ValueError(fmt::format("einsum: '{}' has {} operand subscripts but {} tensors were given",
                                 equation, terms.size(), operands.size()));
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!is_floating(operands[i].dtype()) || operands[i].dtype() != operands[0].dtype())
      throw DTypeError(
          fmt::format("einsum: operand {} is {} {}; expects float32 or float64, all "
                      "of one dtype (operand 0 is {})",
                      i, dtype_name(operands[i].dtype()), shape_str(operands[i].shape()),
                      dtype_name(operands[0].dtype())));
  }
  // The widest "..." decides how many ellipsis labels there are.
  int64_t max_ellipsis = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    int64_t letters = 0;
    for (char c : terms[i]) letters += std::isalpha(static_cast<unsigned char>(c)) ? 1 : 0;
    max_ellipsis = std::max(max_ellipsis, operands[i].dim() - letters);
  }
  std::vector<Term> inputs;
  std::map<int, int64_t> uses, size_of;  // per label: operands using it, its (broadcast) size
  for (size_t i = 0; i < terms.size(); ++i) {
    bool dots = false;
    Labels l = parse_term(equation, terms[i], operands[i].dim(), i, max_ellipsis, &dots);
    for (size_t j = 0; j < l.size(); ++j) {
      const int64_t s = operands[i].size(static_cast<int64_t>(j));
      auto [it, fresh] = size_of.emplace(l[j], s);
      if (!fresh && it->second != s && it->second != 1 && s != 1)
        throw ShapeError(fmt::format(
            "einsum: '{}': label '{}' has size {} in operand {} (shape {}) but {} elsewhere",
            equation,
            l[j] < kEllipsis ? std::string(1, static_cast<char>(l[j])) : std::string("..."), s, i,
            shape_str(operands[i].shape()), it->second));
      if (!fresh) it->second = std::max(it->second, s);
    }
    for (int label : l) ++uses[label];  // occurrences: "ii" alone sums (trace), as torch
    inputs.push_back(take_diagonals({operands[i], l}));
  }
  Labels output;
  if (arrow == std::string::npos) {
    for (int64_t j = 0; j < max_ellipsis; ++j) output.push_back(kEllipsis + static_cast<int>(j));
    for (auto [label, count] : uses)
      if (label < kEllipsis && count == 1) output.push_back(label);
  } else {
    bool dots = false;
    output = parse_term(equation, eq.substr(arrow + 2), -1, 0, max_ellipsis, &dots);
    for (size_t j = 0; j < output.size(); ++j) {
      if (!size_of.count(output[j]) && output[j] < kEllipsis)
        throw ValueError(fmt::format("einsum: '{}': output label '{}' is in no operand", equation,
                                     static_cast<char>(output[j])));
      if (position(output, output[j]) != static_cast<int64_t>(j))
        throw ValueError(fmt::format("einsum: '{}': output label '{}' appears twice", equation,
                                     static_cast<char>(output[j])));
    }
  }
  // Steps 3 to 5.
  auto needed_after = [&](size_t i) {
    Labels needed = output;
    for (size_t j = i + 1; j < inputs.size(); ++j)
      needed.insert(needed.end(), inputs[j].labels.begin(), inputs[j].labels.end());
    return needed;
  };
  Term acc = inputs[0];
  for (size_t i = 1; i < inputs.size(); ++i) acc = contract(acc, inputs[i], needed_after(i));
  acc = sum_out(acc, [&](int l) { return contains(output, l); });
  std::vector<int64_t> perm;
  Shape out_shape;
  for (int l : output) {
    perm.push_back(position(acc.labels, l));
    out_shape.push_back(size_of[l]);
  }
  Tensor y = acc.t.permute(perm);
  if (y.shape() != out_shape) y = y.expand(out_shape);  // a size-1 label broadcast nowhere else
  return y.contiguous();
}

}  // namespace nabla
