// Decoding loops. Token bookkeeping (sequences, beams, finished rows) lives in host vectors; the
// model sees one (B, n) int64 tensor per step.
#include "nabla/nn/generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"
#include "nabla/ops/indexing.h"
#include "nabla/ops/reduce_dim.h"
#include "nabla/ops/sampling.h"
#include "nabla/ops/shape.h"
#include "nabla/ops/softmax.h"
#include "nabla/ops/sort.h"

namespace nabla::nn {

void NextToken::reorder(const Tensor& batch_index) {
  throw Error(
      fmt::format("beam_search: the model does not implement NextToken::reorder (asked "
                  "to reorder its rows by an index of shape {}); a model with a cache or "
                  "a history must, a stateless one may override it empty",
                  shape_str(batch_index.shape())));
}

RecomputeNextToken::RecomputeNextToken(std::function<Tensor(const Tensor&)> forward,
                                       int64_t vocab_size)
    : forward_(std::move(forward)), vocab_size_(vocab_size) {
  if (vocab_size < 1)
    throw ValueError(
        fmt::format("RecomputeNextToken: vocab_size must be >= 1, got {}", vocab_size));
}

Tensor RecomputeNextToken::logits(const Tensor& new_tokens) {
  history_ = history_.defined() ? cat({history_, new_tokens}, 1) : new_tokens;
  Tensor out = forward_(history_);
  if (out.dim() == 3) out = out.select(1, out.size(1) - 1);
  return out;
}

void RecomputeNextToken::reorder(const Tensor& batch_index) {
  if (history_.defined()) history_ = index_select(history_, 0, batch_index);
}

CachedNextToken::CachedNextToken(Step step, int64_t vocab_size, int64_t max_len, std::string name)
    : step_(std::move(step)), vocab_size_(vocab_size), name_(std::move(name)), cache_(max_len) {
  if (vocab_size < 1 || max_len < 1)
    throw ValueError(fmt::format("{}: vocab_size ({}) and max_len ({}) must be >= 1", name_,
                                 vocab_size, max_len));
}

Tensor CachedNextToken::logits(const Tensor& new_tokens) {
  const int64_t n = new_tokens.dim() == 2 ? new_tokens.size(1) : 0;
  if (new_tokens.dim() != 2 || n < 1)
    throw ShapeError(fmt::format("{}: new tokens must be (batch, n) with n >= 1, got shape {}",
                                 name_, shape_str(new_tokens.shape())));
  if (cache_.length() + n > cache_.max_len)
    throw ValueError(fmt::format(
        "{}: {} new tokens after the {} cached positions exceed the cache's {} positions; "
        "reset() and feed the last tokens (a sliding window) to go on",
        name_, n, cache_.length(), cache_.max_len));
  Tensor out = step_(new_tokens, cache_);
  if (out.dim() == 3) out = out.select(1, out.size(1) - 1);
  return out;
}

namespace {

using Rows = std::vector<std::vector<int64_t>>;

// The prompt as rows of ids, checked: int64, (T) or (B, T) with T >= 1, ids in [0, V).
Rows checked_prompt(const char* fn, const NextToken& model, const Tensor& prompt) {
  if (prompt.dtype() != kInt64)
    throw DTypeError(fmt::format("{}: the prompt must be int64 token ids, got {} (shape {})", fn,
                                 dtype_name(prompt.dtype()), shape_str(prompt.shape())));
  if ((prompt.dim() != 1 && prompt.dim() != 2) || prompt.size(-1) < 1)
    throw ShapeError(fmt::format("{}: the prompt must be (T) or (B, T) with T >= 1, got shape {}",
                                 fn, shape_str(prompt.shape())));
  const int64_t v = model.vocab_size();
  const Tensor p2 = prompt.dim() == 1 ? prompt.unsqueeze(0) : prompt;
  const int64_t b = p2.size(0), t = p2.size(1);
  const std::vector<int64_t> ids = p2.contiguous().to_vector<int64_t>();
  Rows rows(static_cast<size_t>(b));
  for (int64_t r = 0; r < b; ++r)
    for (int64_t j = 0; j < t; ++j) {
      const int64_t id = ids[static_cast<size_t>(r * t + j)];
      if (id < 0 || id >= v)
        throw IndexError(
            fmt::format("{}: prompt token {} at row {}, position {} is outside the "
                        "model's vocabulary of {} ids [0, {})",
                        fn, id, r, j, v, v));
      rows[static_cast<size_t>(r)].push_back(id);
    }
  return rows;
}

void check_max_new(const char* fn, int64_t max_new) {
  if (max_new < 0) throw ValueError(fmt::format("{}: max_new must be >= 0, got {}", fn, max_new));
}

void check_end_token(const char* fn, const NextToken& model, std::optional<int64_t> end) {
  if (end && (*end < 0 || *end >= model.vocab_size()))
    throw IndexError(fmt::format("{}: end_token {} is outside the model's vocabulary [0, {})", fn,
                                 *end, model.vocab_size()));
}

Tensor as_tensor(const Rows& rows) {
  std::vector<int64_t> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  const auto b = static_cast<int64_t>(rows.size());
  return from_vector(flat, {b, b == 0 ? 0 : static_cast<int64_t>(rows[0].size())});
}

// The model's logits for new_tokens, checked to be (B, V) floating.
Tensor checked_logits(const char* fn, NextToken& model, const Tensor& new_tokens) {
  Tensor out = model.logits(new_tokens);
  const Shape want{new_tokens.size(0), model.vocab_size()};
  if (!out.defined() || out.shape() != want || !is_floating(out.dtype()))
    throw ShapeError(fmt::format(
        "{}: the model returned logits of shape {} ({}) for tokens of shape {}; expects {} "
        "floating",
        fn, out.defined() ? shape_str(out.shape()) : "undefined",
        out.defined() ? dtype_name(out.dtype()) : "-", shape_str(new_tokens.shape()),
        shape_str(want)));
  return out;
}

// The loop greedy and sample share: pick(logits (B, V)) -> (B) int64 ids.
Tensor decode(const char* fn, NextToken& model, const Tensor& prompt, int64_t max_new,
              std::optional<int64_t> end, const std::function<Tensor(const Tensor&)>& pick) {
  NoGradGuard no_grad;
  Rows rows = checked_prompt(fn, model, prompt);
  check_max_new(fn, max_new);
  check_end_token(fn, model, end);
  model.reset();
  std::vector<bool> stopped(rows.size(), false);
  Tensor input = as_tensor(rows);
  for (int64_t step = 0; step < max_new; ++step) {
    const std::vector<int64_t> next = pick(checked_logits(fn, model, input)).to_vector<int64_t>();
    std::vector<int64_t> fed(rows.size());
    bool all_stopped = true;
    for (size_t r = 0; r < rows.size(); ++r) {
      fed[r] = stopped[r] ? *end : next[r];
      rows[r].push_back(fed[r]);
      if (end && fed[r] == *end) stopped[r] = true;
      all_stopped = all_stopped && stopped[r];
    }
    if (end && all_stopped) break;
    input = from_vector(fed, {static_cast<int64_t>(rows.size()), 1});
  }
  Tensor out = as_tensor(rows);
  return prompt.dim() == 1 ? out.squeeze(0) : out;
}

}  // namespace

Tensor greedy(NextToken& model, const Tensor& prompt, int64_t max_new,
              std::optional<int64_t> end_token) {
  return decode("greedy", model, prompt, max_new, end_token,
                [](const Tensor& logits) { return argmax(logits, -1); });
}

Tensor sample(NextToken& model, const Tensor& prompt, int64_t max_new,
              const SamplingOptions& options, Generator& gen) {
  if (!(options.temperature > 0) || !std::isfinite(options.temperature))
    throw ValueError(
        fmt::format("sample: temperature must be finite and > 0, got {}", options.temperature));
  if (options.top_k < 0)
    throw ValueError(fmt::format("sample: top_k must be >= 0 (0 = off), got {}", options.top_k));
  if (!(options.top_p > 0 && options.top_p <= 1))
    throw ValueError(fmt::format("sample: top_p must be in (0, 1], got {}", options.top_p));
  return decode("sample", model, prompt, max_new, options.end_token, [&](const Tensor& logits) {
    Tensor x = logits;
    if (options.temperature != 1.0) x = apply_temperature(x, options.temperature);
    if (options.top_k > 0) x = top_k_filter(x, options.top_k);
    if (options.top_p < 1.0) x = top_p_filter(x, options.top_p);
    return multinomial(softmax(x, -1), 1, /*replacement=*/true, gen).squeeze(1);
  });
}

// ----------------------------------------------------------------------------
// beam search
namespace {

struct Beam {
  std::vector<int64_t> tokens;  // new tokens only
  double sum = 0;               // sum of their log-probabilities
  int64_t model_row = 0;        // the model's row that holds this beam's state
};

struct Finished {
  std::vector<int64_t> tokens;
  double score = 0;  // sum / tokens.size()^length_penalty
};

double normalised(double sum, int64_t new_tokens, double penalty) {
  return sum / std::pow(static_cast<double>(new_tokens), penalty);
}

// Keeps the best `width` finished sequences of a row (the earliest first among equal scores).
void add_finished(std::vector<Finished>& kept, Finished f, int64_t width) {
  auto at = std::upper_bound(kept.begin(), kept.end(), f.score,
                             [](double s, const Finished& k) { return s > k.score; });
  kept.insert(at, std::move(f));
  if (static_cast<int64_t>(kept.size()) > width) kept.pop_back();
}

}  // namespace

BeamResult beam_search(NextToken& model, const Tensor& prompt, const BeamOptions& options) {
  const char* fn = "beam_search";
  NoGradGuard no_grad;
  const Rows prompts = checked_prompt(fn, model, prompt);
  const int64_t w = options.width, n_ret = options.num_return;
  if (w < 1) throw ValueError(fmt::format("beam_search: width must be >= 1, got {}", w));
  if (n_ret < 1 || n_ret > w)
    throw ValueError(
        fmt::format("beam_search: num_return must be in [1, width = {}], got {}", w, n_ret));
  check_max_new(fn, options.max_new);
  check_end_token(fn, model, options.end_token);
  const auto b = static_cast<int64_t>(prompts.size());
  const int64_t v = model.vocab_size(), pad = options.end_token.value_or(0);
  const double penalty = options.length_penalty;
  model.reset();

  // Before the first step each row has one beam, the prompt, in model row r.
  std::vector<std::vector<Beam>> beams(static_cast<size_t>(b));
  for (int64_t r = 0; r < b; ++r) beams[static_cast<size_t>(r)].push_back({{}, 0.0, r});
  std::vector<std::vector<Finished>> finished(static_cast<size_t>(b));
  std::vector<bool> done(static_cast<size_t>(b), false);
  Tensor input = as_tensor(prompts);
  for (int64_t step = 0; step < options.max_new; ++step) {
    const Tensor logp = log_softmax(checked_logits(fn, model, input).to(kFloat64), -1);
    const std::vector<double> lp = logp.contiguous().to_vector<double>();
    // Model row b * w + j holds beam j of row b from here on.
    std::vector<int64_t> parent(static_cast<size_t>(b * w)), fed(static_cast<size_t>(b * w), pad);
    for (int64_t r = 0; r < b; ++r) {
      auto& live = beams[static_cast<size_t>(r)];
      std::fill_n(parent.begin() + r * w, w, live.empty() ? 0 : live[0].model_row);
      if (done[static_cast<size_t>(r)] || live.empty()) continue;
      // Extensions (beam j, token t) ranked by sum, ties by (j, t): the 2w best.
      struct Candidate {
        double sum;
        int64_t beam, token;
      };
      std::vector<Candidate> cand;
      for (int64_t j = 0; j < static_cast<int64_t>(live.size()); ++j)
        for (int64_t t = 0; t < v; ++t)
          cand.push_back(
              {live[static_cast<size_t>(j)].sum +
                   lp[static_cast<size_t>(live[static_cast<size_t>(j)].model_row * v + t)],
               j, t});
      const auto keep = std::min<int64_t>(2 * w, static_cast<int64_t>(cand.size()));
      std::partial_sort(cand.begin(), cand.begin() + keep, cand.end(),
                        [](const Candidate& x, const Candidate& y) {
                          if (x.sum != y.sum) return x.sum > y.sum;
                          return x.beam != y.beam ? x.beam < y.beam : x.token < y.token;
                        });
      std::vector<Beam> next;
      for (int64_t rank = 0; rank < keep && static_cast<int64_t>(next.size()) < w; ++rank) {
        const Candidate& c = cand[static_cast<size_t>(rank)];
        if (std::isinf(c.sum) && c.sum < 0) break;  // impossible extensions
        std::vector<int64_t> tokens = live[static_cast<size_t>(c.beam)].tokens;
        tokens.push_back(c.token);
        if (options.end_token && c.token == *options.end_token) {
          if (rank < w)  // transformers: an end token ranked below width is not a candidate
            add_finished(finished[static_cast<size_t>(r)],
                         {tokens, normalised(c.sum, step + 1, penalty)}, w);
          continue;
        }
        const int64_t row = r * w + static_cast<int64_t>(next.size());
        parent[static_cast<size_t>(row)] = live[static_cast<size_t>(c.beam)].model_row;
        fed[static_cast<size_t>(row)] = c.token;
        next.push_back({std::move(tokens), c.sum, row});
      }
      live = std::move(next);
      // transformers' is_done: the best extension of this step, finished or not, cannot beat the
      // worst of width finished sequences (a heuristic when length_penalty > 0).
      const auto& fin = finished[static_cast<size_t>(r)];
      const bool enough = static_cast<int64_t>(fin.size()) >= w;
      if (live.empty() ||
          (enough && normalised(cand[0].sum, step + 1, penalty) <= fin.back().score))
        done[static_cast<size_t>(r)] = true;
    }
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    if (step + 1 == options.max_new) break;  // no model call whose logits nobody reads
    model.reorder(from_vector(parent, {b * w}));
    input = from_vector(fed, {b * w, 1});
  }

  // Beams still alive count as finished; then the best n_ret of each row.
  BeamResult res;
  std::vector<std::vector<Finished>> best(static_cast<size_t>(b));
  int64_t longest = 0;
  for (int64_t r = 0; r < b; ++r) {
    auto& fin = finished[static_cast<size_t>(r)];
    if (!done[static_cast<size_t>(r)])
      for (Beam& beam : beams[static_cast<size_t>(r)]) {
        const auto n = static_cast<int64_t>(beam.tokens.size());
        add_finished(fin, {beam.tokens, n == 0 ? 0.0 : normalised(beam.sum, n, penalty)}, w);
      }
    fin.resize(static_cast<size_t>(std::min<int64_t>(n_ret, static_cast<int64_t>(fin.size()))));
    // Fewer sequences than asked (a vocabulary smaller than the beam): the prompt, scored -inf.
    while (static_cast<int64_t>(fin.size()) < n_ret) fin.push_back({{}, -INFINITY});
    for (const Finished& f : fin)
      longest = std::max(longest, static_cast<int64_t>(f.tokens.size()));
    best[static_cast<size_t>(r)] = fin;
  }
  const int64_t t = static_cast<int64_t>(prompts[0].size()), len = t + longest;
  std::vector<int64_t> seq, lengths;
  std::vector<double> scores;
  for (int64_t r = 0; r < b; ++r)
    for (const Finished& f : best[static_cast<size_t>(r)]) {
      std::vector<int64_t> s = prompts[static_cast<size_t>(r)];
      s.insert(s.end(), f.tokens.begin(), f.tokens.end());
      lengths.push_back(static_cast<int64_t>(s.size()));
      s.resize(static_cast<size_t>(len), pad);
      seq.insert(seq.end(), s.begin(), s.end());
      scores.push_back(f.score);
    }
  res.sequences = from_vector(seq, {b, n_ret, len});
  res.lengths = from_vector(lengths, {b, n_ret});
  res.scores = from_vector(scores, {b, n_ret});
  if (prompt.dim() == 1) {
    res.sequences = res.sequences.squeeze(0);
    res.lengths = res.lengths.squeeze(0);
    res.scores = res.scores.squeeze(0);
  }
  return res;
}

}  // namespace nabla::nn
