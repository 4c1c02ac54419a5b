#include "examples/char_gpt/ngram.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "nabla/core/error.h"

namespace char_gpt {

namespace {

uint64_t slot_hash(uint64_t key) {  // splitmix64's finaliser: packed keys are far from random
  key ^= key >> 30;
  key *= 0xbf58476d1ce4e5b9ULL;
  key ^= key >> 27;
  key *= 0x94d049bb133111ebULL;
  return key ^ (key >> 31);
}

}  // namespace

PackedCounts::Entry& PackedCounts::at(uint64_t key) {
  if (2 * (used_ + 1) > slots_.size()) grow();
  const size_t mask = slots_.size() - 1;
  for (size_t i = slot_hash(key) & mask;; i = (i + 1) & mask) {
    Entry& e = slots_[i];
    if (e.key == key) return e;
    if (e.key == 0) {
      e.key = key;
      ++used_;
      return e;
    }
  }
}

const PackedCounts::Entry* PackedCounts::find(uint64_t key) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = slot_hash(key) & mask;; i = (i + 1) & mask) {
    const Entry& e = slots_[i];
    if (e.key == key) return &e;
    if (e.key == 0) return nullptr;
  }
}

void PackedCounts::grow() {
  std::vector<Entry> old(slots_.size() * 2);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (const Entry& e : old) {
    if (e.key == 0) continue;
    size_t i = slot_hash(e.key) & mask;
    while (slots_[i].key != 0) i = (i + 1) & mask;
    slots_[i] = e;
  }
}

NgramModel::NgramModel(int order, double discount, int64_t vocab)
    : order_(order), discount_(discount), vocab_(vocab), bits_(1) {
  while ((int64_t{1} << bits_) < vocab) ++bits_;
  if (order < 1 || vocab < 1 || order * bits_ > 63 || !(discount > 0 && discount < 1))
    throw nabla::ValueError(fmt::format(
        "NgramModel: order {} (>= 1, order * {} bits per id <= 63), vocab {} (>= 1) and "
        "discount {} (in (0, 1)) do not fit",
        order, bits_, vocab, discount));
}

void NgramModel::train(const std::vector<int64_t>& ids) {
  const auto n = static_cast<int64_t>(ids.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = ids[static_cast<size_t>(i)];
    if (c < 0 || c >= vocab_)
      throw nabla::IndexError(
          fmt::format("NgramModel::train: id {} at offset {} outside [0, {})", c, i, vocab_));
    // Contexts ids[i-k, i) for k = 0 .. order-1, built by prepending one id at a time.
    uint64_t context = 1;  // the empty context: just the leading bit
    uint64_t high = 1;     // where the next prepended id goes
    for (int k = 0; k < order_ && k <= i; ++k) {
      if (k > 0) {
        const uint64_t prev = static_cast<uint64_t>(ids[static_cast<size_t>(i - k)]);
        context = (context ^ high) | (prev << (bits_ * (k - 1))) | (high << bits_);
        high <<= bits_;
      }
      PackedCounts::Entry& g = ngrams_.at((context << bits_) | static_cast<uint64_t>(c));
      PackedCounts::Entry& h = contexts_.at(context);
      ++h.count;
      if (g.count++ == 0) ++h.distinct;
    }
  }
}

double NgramModel::probability(const int64_t* context, int64_t context_len, int64_t c) const {
  double p = 1.0 / static_cast<double>(vocab_);
  uint64_t key = 1, high = 1;
  const int64_t longest = std::min<int64_t>(order_ - 1, context_len);
  for (int64_t k = 0; k <= longest; ++k) {
    if (k > 0) {
      const auto prev = static_cast<uint64_t>(context[context_len - k]);
      key = (key ^ high) | (prev << (bits_ * (k - 1))) | (high << bits_);
      high <<= bits_;
    }
    const PackedCounts::Entry* h = contexts_.find(key);
    if (h == nullptr) break;  // unseen, so every longer context is unseen too
    const PackedCounts::Entry* g = ngrams_.find((key << bits_) | static_cast<uint64_t>(c));
    const double n = h->count, seen = g ? g->count : 0;
    p = std::max(seen - discount_, 0.0) / n + discount_ * h->distinct / n * p;
  }
  return p;
}

double NgramModel::nats_per_char(const std::vector<int64_t>& ids) const {
  if (ids.empty()) throw nabla::ValueError("NgramModel::nats_per_char: empty text");
  double nll = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t c = ids[i];
    if (c < 0 || c >= vocab_)
      throw nabla::IndexError(fmt::format(
          "NgramModel::nats_per_char: id {} at offset {} outside [0, {})", c, i, vocab_));
    nll -= std::log(probability(ids.data(), static_cast<int64_t>(i), c));
  }
  return nll / static_cast<double>(ids.size());
}

}  // namespace char_gpt
