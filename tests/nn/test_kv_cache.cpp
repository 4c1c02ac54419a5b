// Incremental decoding (nn/kv_cache.h): cached MultiheadAttention equals the full causal
// attention; greedy decoding with a cache equals decoding by recomputing the whole prefix, for a
// decoder-only (GPT-style: causal pre-norm TransformerEncoder) and an encoder-decoder
// Transformer; the maximum length, reorder (beam search) and reset; misuse errors.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

void randomize(nn::Module& m, DType dt, uint64_t seed) {
  m.to(dt);
  Generator g(seed);
  NoGradGuard no_grad;
  for (auto& p : m.parameters()) p.copy_(mul(randn(p.shape(), g, dt), 0.3));
}

Tensor positions(int64_t offset, int64_t count) {
  return arange(static_cast<double>(offset), static_cast<double>(offset + count));
}

Tensor tokens(std::vector<int64_t> values, Shape shape) {
  return from_vector<int64_t>(values, std::move(shape));
}

// A decoder-only model as GPT: token + learned position embeddings, a causal pre-norm GELU
// TransformerEncoder with a final norm, a linear head.
struct TinyGpt : nn::Module {
  TinyGpt(int64_t vocab, int64_t d, int64_t max_len) : Module("TinyGpt") {
    tok = register_module("tok", std::make_shared<nn::Embedding>(vocab, d));
    pos = register_module("pos", std::make_shared<nn::Embedding>(max_len, d));
    stack = register_module("stack",
                            std::make_shared<nn::TransformerEncoder>(
                                nn::TransformerLayerOptions{.d_model = d,
                                                            .nhead = 2,
                                                            .dim_feedforward = 2 * d,
                                                            .dropout = 0.0,
                                                            .activation = nn::FFNActivation::GELU,
                                                            .batch_first = true,
                                                            .norm_first = true},
                                2, true));
    head = register_module("head", std::make_shared<nn::Linear>(d, vocab));
  }
  // tokens (B, l) at positions offset ... offset + l - 1 -> logits (B, l, vocab).
  Tensor logits(const Tensor& t, int64_t offset, nn::TransformerCache* cache) const {
    Tensor x = add((*tok)(t), (*pos)(positions(offset, t.size(1))));
    return (*head)((*stack)(x, {.is_causal = true, .cache = cache}));
  }
  std::shared_ptr<nn::Embedding> tok, pos;
  std::shared_ptr<nn::TransformerEncoder> stack;
  std::shared_ptr<nn::Linear> head;
};

// An encoder-decoder model around nn::Transformer (post-norm, seq-first).
struct TinySeq2Seq : nn::Module {
  TinySeq2Seq(int64_t vocab, int64_t d, int64_t max_len) : Module("TinySeq2Seq") {
    tok = register_module("tok", std::make_shared<nn::Embedding>(vocab, d));
    pos = register_module("pos", std::make_shared<nn::Embedding>(max_len, d));
    model = register_module(
        "model", std::make_shared<nn::Transformer>(nn::TransformerOptions{.d_model = d,
                                                                          .nhead = 2,
                                                                          .num_encoder_layers = 2,
                                                                          .num_decoder_layers = 2,
                                                                          .dim_feedforward = 2 * d,
                                                                          .dropout = 0.0}));
    head = register_module("head", std::make_shared<nn::Linear>(d, vocab));
  }
  Tensor embed(const Tensor& t, int64_t offset) const {  // (B, l) -> (l, B, d)
    return add((*tok)(t), (*pos)(positions(offset, t.size(1)))).transpose(0, 1);
  }
  Tensor memory(const Tensor& src, const Tensor& kpm) const {
    return (*model->encoder())(embed(src, 0), {.src_key_padding_mask = kpm});
  }
  // -> logits (B, l, vocab)
  Tensor logits(const Tensor& t, int64_t offset, const Tensor& memory, const Tensor& kpm,
                nn::TransformerCache* cache) const {
    Tensor y = (*model->decoder())(
        embed(t, offset), memory,
        {.memory_key_padding_mask = kpm, .tgt_is_causal = true, .cache = cache});
    return (*head)(y.transpose(0, 1));
  }
  std::shared_ptr<nn::Embedding> tok, pos;
  std::shared_ptr<nn::Transformer> model;
  std::shared_ptr<nn::Linear> head;
};

Tensor last(const Tensor& logits) { return logits.select(1, logits.size(1) - 1); }
Tensor greedy_next(const Tensor& last_logits) { return argmax(last_logits, -1).unsqueeze(1); }

// Greedy decoding, a plain argmax loop, with or without the cache; `step_logits` gets the last
// position's logits of every step. logits_of(tokens, offset, cache) runs the model.
template <class Model>
Tensor greedy(const Model& logits_of, Tensor seq, int64_t steps, nn::TransformerCache* cache,
              std::vector<Tensor>& step_logits) {
  Tensor fresh = seq;  // what the next call must process
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t offset = cache ? cache->length() : 0;
    Tensor l = last(logits_of(cache ? fresh : seq, offset, cache));
    step_logits.push_back(l);
    fresh = greedy_next(l);
    seq = cat({seq, fresh}, 1);
  }
  return seq;
}

void check_same_decoding(const Tensor& a, const Tensor& b, const std::vector<Tensor>& la,
                         const std::vector<Tensor>& lb) {
  REQUIRE(la.size() == lb.size());
  for (size_t i = 0; i < la.size(); ++i) {
    INFO("step " << i);
    CHECK_CLOSE(la[i], lb[i], 1e-6, 1e-6);
  }
  CHECK(a.to_vector<int64_t>() == b.to_vector<int64_t>());
}

}  // namespace

TEST_CASE("KV cache: cached self-attention equals full causal attention", "[nn]") {
  for (auto path : {nn::AttentionPath::Fused, nn::AttentionPath::Materialized}) {
    for (bool batch_first : {false, true}) {
      INFO("fused " << (path == nn::AttentionPath::Fused) << " batch_first " << batch_first);
      nn::MultiheadAttention mha(8, 2, 0.0, true, 0, 0, batch_first);
      randomize(mha, kFloat64, 3);
      const int64_t sdim = batch_first ? 1 : 0;
      Tensor x = batch_first ? test::leaf({2, 6, 8}).detach() : test::leaf({6, 2, 8}).detach();
      Tensor kpm = from_vector<bool>({false, true, false, false, false, false,  //
                                      false, false, false, false, true, false},
                                     {2, 6});
      NoGradGuard no_grad;
      Tensor full =
          mha(x, x, x,
              {.key_padding_mask = kpm, .is_causal = true, .need_weights = false, .path = path})
              .output;
      nn::KVCache cache(6);
      std::vector<Tensor> parts;
      // A prompt of 3 positions (the causal limit shifted inside the new block), then 1 at a time.
      for (auto [begin, count] : std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 1}, {4, 2}}) {
        Tensor xs = x.narrow(sdim, begin, count).contiguous();
        parts.push_back(mha(xs, xs, xs,
                            {.key_padding_mask = kpm.narrow(1, 0, begin + count),
                             .is_causal = true,
                             .need_weights = false,
                             .path = path,
                             .kv_cache = &cache})
                            .output);
      }
      CHECK(cache.length() == 6);
      CHECK_CLOSE(cat(parts, sdim), full, 1e-12, 0);
    }
  }
}

TEST_CASE("KV cache: unbatched (L, E) input", "[nn]") {
  nn::MultiheadAttention mha(8, 2);
  randomize(mha, kFloat64, 8);
  Tensor x = test::leaf({5, 8}).detach();
  NoGradGuard no_grad;
  Tensor full = mha(x, x, x, {.is_causal = true}).output;
  nn::KVCache cache(5);
  std::vector<Tensor> parts;
  for (int64_t i = 0; i < 5; ++i) {
    Tensor xi = x.narrow(0, i, 1);
    parts.push_back(mha(xi, xi, xi, {.is_causal = true, .kv_cache = &cache}).output);
  }
  CHECK(cache.batch_size() == 1);
  CHECK_CLOSE(cat(parts, 0), full, 1e-12, 0);
}

TEST_CASE("KV cache: a static cache stores the memory's keys/values once", "[nn]") {
  nn::MultiheadAttention mha(8, 2, 0.0, true, 5, 3);  // separate q/k/v weights (kdim, vdim)
  randomize(mha, kFloat64, 4);
  Tensor q = test::leaf({4, 2, 8}).detach(), k = test::leaf({7, 2, 5}, 1).detach(),
         v = test::leaf({7, 2, 3}, 2).detach();
  NoGradGuard no_grad;
  Tensor full = mha(q, k, v).output;
  nn::KVCache cache = nn::KVCache::static_kv();
  Tensor first = mha(q.narrow(0, 0, 1), k, v, {.kv_cache = &cache}).output;
  CHECK(cache.length() == 7);
  Tensor rest = mha(q.narrow(0, 1, 3), Tensor(), Tensor(), {.kv_cache = &cache}).output;
  CHECK_CLOSE(cat({first, rest}, 0), full, 1e-12, 0);
}

TEST_CASE("KV cache: greedy decoding of a GPT-style model equals full recomputation", "[nn]") {
  TinyGpt gpt(11, 16, 32);
  randomize(gpt, kFloat32, 5);
  gpt.eval();
  NoGradGuard no_grad;
  auto run = [&](const Tensor& t, int64_t offset, nn::TransformerCache* c) {
    return gpt.logits(t, offset, c);
  };
  Tensor prompt = tokens({1, 2, 3, 7, 5, 4}, {2, 3});
  std::vector<Tensor> full_logits, cached_logits;
  Tensor full = greedy(run, prompt, 12, nullptr, full_logits);
  nn::TransformerCache cache(32);
  Tensor cached = greedy(run, prompt, 12, &cache, cached_logits);
  CHECK(cache.length() == 3 + 11);
  check_same_decoding(full, cached, full_logits, cached_logits);

  SECTION("reset starts a new sequence with the same cache") {
    cache.reset();
    CHECK(cache.length() == 0);
    std::vector<Tensor> again;
    check_same_decoding(full, greedy(run, prompt, 12, &cache, again), full_logits, again);
  }
  SECTION("past max_len: a clear error") {
    nn::TransformerCache short_cache(4);
    std::vector<Tensor> l;
    CHECK_THROWS_WITH(greedy(run, prompt, 3, &short_cache, l),
                      Contains("KVCache") && Contains("max_len 4") && Contains("4 cached"));
  }
  SECTION("reorder fans a batch out into beams") {
    // After the prompt and 2 steps, the rows become (1, 1, 0); each then gets its own token.
    Tensor seq = full.narrow(1, 0, 5);
    Tensor index = tokens({1, 1, 0}, {3});
    cache.reset();
    std::vector<Tensor> l;
    greedy(run, prompt, 2, &cache, l);  // caches positions 0..3; position 4 is fed next
    cache.reorder(index);
    Tensor next = index_select(seq, 0, index).narrow(1, 4, 1).contiguous();
    Tensor step = last(run(next, cache.length(), &cache));
    Tensor expected = last(run(index_select(seq, 0, index), 0, nullptr));
    CHECK_CLOSE(step, expected, 1e-6, 1e-6);
    // And a fresh token per beam.
    Tensor more = tokens({9, 0, 6}, {3, 1});
    Tensor more_step = last(run(more, cache.length(), &cache));  // not in CHECK_CLOSE: runs once
    CHECK_CLOSE(more_step, last(run(cat({index_select(seq, 0, index), more}, 1), 0, nullptr)), 1e-6,
                1e-6);
  }
}

TEST_CASE("KV cache: greedy decoding of an encoder-decoder Transformer equals recomputation",
          "[nn]") {
  TinySeq2Seq net(13, 16, 32);
  randomize(net, kFloat32, 6);
  net.eval();
  NoGradGuard no_grad;
  Tensor src = tokens({4, 8, 2, 9, 1, 3, 3, 12, 5, 7}, {2, 5});
  Tensor src_kpm = from_vector<bool>({false, false, false, true, true,  //
                                      false, false, false, false, false},
                                     {2, 5});
  Tensor memory = net.memory(src, src_kpm);
  bool first = true;
  auto run = [&](const Tensor& t, int64_t offset, nn::TransformerCache* c) {
    // With a cache, memory is read on the first step only: later steps pass none.
    Tensor m = (c && !first) ? Tensor() : memory;
    if (c) first = false;
    return net.logits(t, offset, m, src_kpm, c);
  };
  Tensor bos = tokens({0, 0}, {2, 1});
  std::vector<Tensor> full_logits, cached_logits;
  Tensor full = greedy(run, bos, 10, nullptr, full_logits);
  nn::TransformerCache cache(16);
  Tensor cached = greedy(run, bos, 10, &cache, cached_logits);
  CHECK(cache.cross_attn.size() == 2);
  CHECK(cache.cross_attn[0].length() == 5);
  check_same_decoding(full, cached, full_logits, cached_logits);

  // Beam-style reorder moves the memory's cached keys/values too.
  Tensor index = tokens({1, 0, 1}, {3});
  cache.reorder(index);
  Tensor seq = index_select(full, 0, index), m3 = index_select(memory, 1, index);
  Tensor k3 = index_select(src_kpm, 0, index);
  // The cache holds all but the last generated token: feed it, then one more per beam.
  REQUIRE(cache.length() == seq.size(1) - 1);
  Tensor step = last(net.logits(seq.narrow(1, seq.size(1) - 1, 1).contiguous(), cache.length(),
                                Tensor(), k3, &cache));
  CHECK_CLOSE(step, last(net.logits(seq, 0, m3, k3, nullptr)), 1e-6, 1e-6);
  Tensor more = tokens({2, 5, 11}, {3, 1});
  step = last(net.logits(more, cache.length(), Tensor(), k3, &cache));
  CHECK_CLOSE(step, last(net.logits(cat({seq, more}, 1), 0, m3, k3, nullptr)), 1e-6, 1e-6);
}

TEST_CASE("KV cache: misuse gives clear errors", "[nn]") {
  CHECK_THROWS_WITH(nn::KVCache(0), Contains("max_len must be positive"));
  nn::KVCache c(3);
  NoGradGuard no_grad;
  Tensor k = zeros({1, 2, 2, 4}), v = zeros({1, 2, 2, 4});
  c.append(k, v);
  CHECK_THROWS_WITH(c.append(k, v),
                    Contains("2 new positions after the 2 cached exceed max_len 3"));
  CHECK_THROWS_WITH(c.append(zeros({1, 2, 1, 5}), zeros({1, 2, 1, 5})),
                    Contains("another batch or model"));
  CHECK_THROWS_WITH(c.reorder(tokens({0, 1}, {2})), Contains("reorder") && Contains("holds 1"));
  CHECK_THROWS_WITH(c.reorder(zeros({2})), Contains("1-D int64"));
  c.reorder(tokens({0, 0, 0}, {3}));
  CHECK(c.batch_size() == 3);
  CHECK(c.keys().shape() == Shape{3, 2, 2, 4});
  c.reset();
  CHECK(c.empty());
  c.append(zeros({2, 2, 1, 4}), zeros({2, 2, 1, 4}));  // a new batch size after reset
  CHECK(c.batch_size() == 2);

  nn::MultiheadAttention mha(4, 2);
  mha.to(kFloat64);
  Tensor x = test::leaf({2, 1, 4}).detach(), y = test::leaf({2, 1, 4}, 1).detach();
  nn::KVCache s(8);
  CHECK_THROWS_WITH(mha(x, x, x, {.kv_cache = &s}), Contains("must be causal"));
  CHECK_THROWS_WITH(mha(x, y, y, {.is_causal = true, .kv_cache = &s}), Contains("one tensor"));
  nn::TransformerEncoder enc(
      nn::TransformerLayerOptions{.d_model = 4, .nhead = 2, .dim_feedforward = 4, .dropout = 0.0},
      2);
  enc.to(kFloat64);
  nn::TransformerCache tc(8);
  CHECK_THROWS_WITH(enc(x, {.cache = &tc}),
                    Contains("TransformerEncoder") && Contains("is_causal"));
  CHECK_THROWS_WITH(enc(x, {.src_mask = zeros({2, 2}, kFloat64), .is_causal = true, .cache = &tc}),
                    Contains("src_mask"));
  enc(x, {.is_causal = true, .cache = &tc});
  nn::TransformerEncoder enc3(
      nn::TransformerLayerOptions{.d_model = 4, .nhead = 2, .dim_feedforward = 4, .dropout = 0.0},
      3);
  enc3.to(kFloat64);
  CHECK_THROWS_WITH(enc3(x, {.is_causal = true, .cache = &tc}), Contains("with 2 layers"));

  nn::TransformerDecoder dec(
      nn::TransformerLayerOptions{.d_model = 4, .nhead = 2, .dim_feedforward = 4, .dropout = 0.0},
      1);
  dec.to(kFloat64);
  nn::TransformerCache dc(8);
  CHECK_THROWS_WITH(dec(x, Tensor(), {.tgt_is_causal = true, .cache = &dc}),
                    Contains("memory is undefined"));
  CHECK_THROWS_WITH(dec(x, y, {.cache = &dc}), Contains("tgt_is_causal"));
  CHECK_THROWS_WITH(dec(x, y, {.tgt_is_causal = true, .memory_is_causal = true, .cache = &dc}),
                    Contains("memory_is_causal"));

  GradMode::set_enabled(true);
  Tensor g = test::leaf({2, 1, 4});
  nn::TransformerCache gc(8);
  CHECK_THROWS_WITH(enc(g, {.is_causal = true, .cache = &gc}), Contains("NoGradGuard"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
