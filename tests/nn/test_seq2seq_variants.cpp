// The seq2seq variants: GRU or LSTM cells, Bahdanau attention or a fixed context (no attention),
// a bidirectional encoder. Each: shapes and names, teacher forcing equals step-by-step decoding,
// float64 gradcheck, a few training steps reduce the loss, a checkpoint round trip, and a
// checkpoint of another variant refused with a message naming the flag.
#include <unistd.h>

#include <filesystem>

#include "nabla/nn/seq2seq.h"
#include "tests/helpers.h"
#include "tests/nn/seq2seq_helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using nn::Seq2SeqAttention;
using nn::Seq2SeqOptions;
using nn::Seq2SeqRNN;
using test::tokens;

namespace {

// Every variant but the default (tests/nn/test_gru_seq2seq.cpp covers that one).
std::vector<Seq2SeqOptions> variants() {
  std::vector<Seq2SeqOptions> v;
  for (const Seq2SeqOptions& o : test::seq2seq_variants())
    if (nn::seq2seq_flags(o) != nn::seq2seq_flags({})) v.push_back(o);
  return v;
}

bool has_param(nn::Module& m, const std::string& name) {
  for (const auto& [n, p] : m.named_parameters())
    if (n == name) return true;
  return false;
}

}  // namespace

TEST_CASE("Seq2Seq variants: flags, names and shapes", "[nn]") {
  CHECK(nn::seq2seq_flags({}) == "--rnn gru --attention bahdanau");
  for (const Seq2SeqOptions& base : variants()) {
    Seq2SeqOptions o = base;
    o.num_layers = 2;
    INFO(nn::seq2seq_flags(o));
    const bool lstm = o.rnn == Seq2SeqRNN::kLSTM, att = o.attention == Seq2SeqAttention::kBahdanau;
    const int64_t D = o.bidirectional ? 2 : 1, G = lstm ? 4 : 3;
    auto model = test::make_seq2seq(10, 8, 16, o);
    CHECK(model->variant().rnn == o.rnn);
    CHECK(has_param(*model, "encoder.rnn.weight_ih_l0_reverse") == o.bidirectional);
    CHECK(has_param(*model, "decoder.bridge.weight") == o.bidirectional);
    CHECK(has_param(*model, "decoder.attention.W_k.weight") == att);
    for (const auto& [n, p] : model->named_parameters()) {
      if (n == "encoder.rnn.weight_hh_l0") CHECK(p.shape() == Shape{G * 16, 16});
      if (n == "decoder.rnn.weight_ih_l0") CHECK(p.shape() == Shape{G * 16, D * 16 + 8});
      if (n == "decoder.attention.W_k.weight") CHECK(p.shape() == Shape{16, D * 16});
    }
    Tensor src = tokens(std::vector<int64_t>(4 * 7, 3), {4, 7});
    auto encoded = model->encoder()(src);
    CHECK(encoded.output.shape() == Shape{7, 4, D * 16});
    CHECK(encoded.h_n.shape() == Shape{2 * D, 4, 16});
    CHECK(encoded.c_n.defined() == lstm);
    nn::DecoderState state = model->decoder().init_state(encoded, tokens({3, 2, 7, 5}, {4}));
    CHECK(state.hidden.shape() == Shape{2, 4, 16});
    CHECK(state.cell.defined() == lstm);
    CHECK(state.context.defined() == !att);
    if (!att) CHECK(state.context.shape() == Shape{4, D * 16});
    Tensor logits = model->decoder()(tokens(std::vector<int64_t>(4 * 5, 1), {4, 5}), state);
    CHECK(logits.shape() == Shape{4, 5, 10});
    CHECK(model->decoder().attention_weights().defined() == att);
    CHECK(state.hidden.shape() == Shape{2, 4, 16});
  }
  // Encoder and decoder of different variants do not fit together.
  CHECK_THROWS_WITH(nn::EncoderDecoder(std::make_shared<nn::Seq2SeqEncoder>(10, 8, 16),
                                       std::make_shared<nn::AttentionDecoder>(
                                           10, 8, 16, Seq2SeqOptions{.rnn = Seq2SeqRNN::kLSTM})),
                    Contains("--rnn gru") && Contains("--rnn lstm"));
  nn::AttentionDecoder bi_dec(10, 8, 16, {.bidirectional = true});
  CHECK_THROWS_WITH(
      bi_dec.init_state(nn::Seq2SeqEncoder(10, 8, 16)(tokens({1, 2}, {1, 2})), {}),
      Contains("AttentionDecoder") && Contains("(S, B, 32)") && Contains("--bidirectional"));
}

TEST_CASE("Seq2Seq variants: teacher forcing equals decoding step by step; gradcheck", "[nn]") {
  for (Seq2SeqOptions o : variants()) {
    o.dtype = kFloat64;
    INFO(nn::seq2seq_flags(o));
    test::check_teacher_forcing_and_gradcheck(*test::make_seq2seq(5, 2, 3, o));
  }
}

TEST_CASE("Seq2Seq variants: a few steps of training reduce the loss; greedy decoding", "[nn]") {
  const test::ReversalTask task = test::reversal_task();
  const int64_t V = task.V, S = task.S;
  const Tensor &words = task.words, &tgt_in = task.tgt_in, &tgt_out = task.tgt_out,
               &valid = task.valid;
  for (const Seq2SeqOptions& o : variants()) {
    INFO(nn::seq2seq_flags(o));
    manual_seed(1);
    auto model = test::make_seq2seq(V, 8, 24, o);
    optim::Adam opt(model->parameters(), {.lr = 0.02});
    double first = 0, last = 0;
    for (int step = 0; step < 25; ++step) {
      opt.zero_grad();
      Tensor loss =
          cross_entropy((*model)(words, tgt_in, valid).reshape({-1, V}), tgt_out.flatten());
      if (step == 0) first = loss.item();
      last = loss.item();
      loss.backward();
      opt.step();
    }
    INFO("loss " << first << " -> " << last);
    CHECK(last < 0.6 * first);
    auto decoded = model->greedy_decode(words.select(0, 0), S, 1, 2, 6);
    CHECK(decoded.tokens.size() <= 6);
    CHECK(decoded.attention.defined() == (o.attention == Seq2SeqAttention::kBahdanau));
    if (decoded.attention.defined()) CHECK(decoded.attention.size(1) == S);
  }
}

TEST_CASE("Seq2Seq variants: checkpoint round trip; another variant's is refused by flag",
          "[nn][io]") {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("nabla_s2s_variant_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  Tensor src = tokens({1, 2, 3, 4, 0, 2}, {2, 3}), tgt = tokens({0, 1, 3, 4}, {2, 2});
  std::vector<Seq2SeqOptions> all = variants();
  all.push_back({});  // the default variant too, as the source of a wrong checkpoint
  for (const Seq2SeqOptions& o : all) {
    INFO(nn::seq2seq_flags(o));
    manual_seed(3);
    auto a = test::make_seq2seq(6, 4, 5, o);
    io::Checkpoint ck;
    ck.put_section("model", a->state_dict());
    ck.save(path);
    const nn::StateDict saved = io::Checkpoint::load(path).section("model");
    manual_seed(4);
    auto b = test::make_seq2seq(6, 4, 5, o);
    b->check_variant(saved);  // the same variant passes
    b->load_state_dict(saved);
    CHECK_CLOSE((*b)(src, tgt, {}), (*a)(src, tgt, {}), 0, 0);
    auto found = nn::EncoderDecoder::variant_of(saved);
    REQUIRE(found.has_value());
    CHECK(nn::seq2seq_flags(*found) == nn::seq2seq_flags(o));

    // Every other variant names the flags that differ, before load_state_dict's shape list.
    for (const Seq2SeqOptions& other : all) {
      if (nn::seq2seq_flags(other) == nn::seq2seq_flags(o)) continue;
      INFO("loaded into " << nn::seq2seq_flags(other));
      auto c = test::make_seq2seq(6, 4, 5, other);
      std::string message;
      try {
        c->check_variant(saved);
      } catch (const ValueError& e) {
        message = e.what();
      }
      CHECK_THAT(message, Contains(nn::seq2seq_flags(o)) && Contains(nn::seq2seq_flags(other)));
      CHECK((message.find("--rnn differ") != std::string::npos ||
             message.find("--rnn and") != std::string::npos) == (other.rnn != o.rnn));
      CHECK((message.find(": --attention") != std::string::npos ||
             message.find("and --attention") != std::string::npos) ==
            (other.attention != o.attention));
      CHECK((message.find(": --bidirectional") != std::string::npos ||
             message.find("and --bidirectional") != std::string::npos) ==
            (other.bidirectional != o.bidirectional));
      CHECK_THROWS_AS(c->load_state_dict(saved), ValueError);  // and loading alone fails too
    }
  }
  std::filesystem::remove(path);
  // A state dict that is no seq2seq model is left to load_state_dict's message.
  auto m = test::make_seq2seq(6, 4, 5, {});
  CHECK_FALSE(nn::EncoderDecoder::variant_of(nn::Linear(2, 3).state_dict()).has_value());
  CHECK_NOTHROW(m->check_variant(nn::Linear(2, 3).state_dict()));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
