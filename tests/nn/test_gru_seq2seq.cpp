// GRU (PyTorch's names, shapes, gate equations, layouts, dropout) and the Bahdanau seq2seq
// (shapes, names, masks, step-by-step equivalence, gradcheck, greedy decoding, a small task).
#include "nabla/nn/gru.h"

#include "nabla/nn/seq2seq.h"
#include "tests/helpers.h"
#include "tests/nn/module_gradcheck.h"
#include "tests/nn/seq2seq_helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;
using test::tokens;

namespace {

// GRU output and h_n as one tensor, for gradcheck.
Tensor joined(const nn::GRU::Output& o) { return cat({o.output.flatten(), o.h_n.flatten()}); }

}  // namespace

TEST_CASE("GRU: PyTorch's parameter names, shapes and initialisation", "[nn]") {
  nn::GRU gru(3, 4, 2);
  auto params = gru.named_parameters();
  REQUIRE(params.size() == 8);
  const char* names[] = {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                         "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"};
  const Shape shapes[] = {{12, 3}, {12, 4}, {12}, {12}, {12, 4}, {12, 4}, {12}, {12}};
  for (size_t i = 0; i < 8; ++i) {
    CHECK(params[i].first == names[i]);
    CHECK(params[i].second.shape() == shapes[i]);
    for (float v : params[i].second.to_vector<float>()) CHECK(std::abs(v) <= 0.5f);  // 1/sqrt(4)
  }
  nn::GRU no_bias(3, 4, nn::GRUOptions{.num_layers = 1, .bias = false});
  REQUIRE(no_bias.named_parameters().size() == 2);
  CHECK(no_bias.named_parameters()[1].first == "weight_hh_l0");
}

TEST_CASE("GRU: one step matches the gate equations written out", "[nn]") {
  nn::GRU gru(3, 2, 1, true, false, 0, kFloat64);
  Tensor x = leaf({1, 4, 3}), h0 = leaf({1, 4, 2}, 1);
  auto out = gru(x, h0);
  REQUIRE(out.output.shape() == Shape{1, 4, 2});
  REQUIRE(out.h_n.shape() == Shape{1, 4, 2});
  auto p = gru.named_parameters();
  const Tensor &w_ih = p[0].second, &w_hh = p[1].second, &b_ih = p[2].second, &b_hh = p[3].second;
  auto gate = [&](const Tensor& w, const Tensor& b, int g, const Tensor& in) {
    return linear(in, w.narrow(0, 2 * g, 2), b.narrow(0, 2 * g, 2));
  };
  Tensor xt = x.select(0, 0), h = h0.select(0, 0);
  Tensor r = sigmoid(gate(w_ih, b_ih, 0, xt) + gate(w_hh, b_hh, 0, h));
  Tensor z = sigmoid(gate(w_ih, b_ih, 1, xt) + gate(w_hh, b_hh, 1, h));
  Tensor n = tanh(gate(w_ih, b_ih, 2, xt) + r * gate(w_hh, b_hh, 2, h));
  Tensor expect = (1.0 - z) * n + z * h;
  CHECK_CLOSE(out.output.select(0, 0), expect, 1e-12, 0);
  CHECK_CLOSE(out.h_n.select(0, 0), expect, 1e-12, 0);
}

TEST_CASE("GRU: layouts agree and h_n is each layer's last state", "[nn]") {
  nn::GRU gru(3, 4, 2, true, false, 0, kFloat64);
  nn::GRU gru_bf(3, 4, 2, true, /*batch_first=*/true, 0, kFloat64);
  gru_bf.load_state_dict(gru.state_dict());
  Tensor x = leaf({5, 2, 3}), h0 = leaf({2, 2, 4}, 1);
  auto a = gru(x, h0);
  auto b = gru_bf(x.transpose(0, 1), h0);
  REQUIRE(a.output.shape() == Shape{5, 2, 4});
  REQUIRE(b.output.shape() == Shape{2, 5, 4});
  CHECK_CLOSE(b.output.transpose(0, 1), a.output, 0, 0);
  CHECK_CLOSE(b.h_n, a.h_n, 0, 0);
  CHECK_CLOSE(a.h_n.select(0, 1), a.output.select(0, 4), 0, 0);  // top layer, last step
  // Zero h0 is the default.
  CHECK_CLOSE(gru(x).output, gru(x, zeros({2, 2, 4}, kFloat64)).output, 0, 0);
  // Unbatched (T, in) is batch 1 squeezed.
  auto u = gru(x.select(1, 1), h0.select(1, 1));
  CHECK(u.output.shape() == Shape{5, 4});
  CHECK(u.h_n.shape() == Shape{2, 4});
  CHECK_CLOSE(u.output, a.output.select(1, 1), 1e-12, 0);
  // Feeding the sequence in two halves with the state carried gives the same result.
  auto first = gru(x.narrow(0, 0, 2), h0);
  auto second = gru(x.narrow(0, 2, 3), first.h_n);
  CHECK_CLOSE(second.output, a.output.narrow(0, 2, 3), 1e-12, 0);
  CHECK_CLOSE(second.h_n, a.h_n, 1e-12, 0);
}

TEST_CASE("GRU: gradcheck over inputs, h0 and parameters", "[nn]") {
  SECTION("2 layers, time-major, with h0") {
    nn::GRU gru(2, 3, 2, true, false, 0, kFloat64);
    CHECK_MODULE_GRADCHECK(gru, (std::vector{leaf({3, 2, 2}), leaf({2, 2, 3}, 1)}),
                           [&](const std::vector<Tensor>& a) { return joined(gru(a[0], a[1])); });
  }
  SECTION("batch_first, transposed non-contiguous input") {
    nn::GRU gru(3, 2, 1, true, true, 0, kFloat64);
    Tensor x = leaf({3, 4, 2}).detach().transpose(0, 2).requires_grad_();  // (2, 4, 3)
    REQUIRE_FALSE(x.is_contiguous());
    CHECK_MODULE_GRADCHECK(gru, (std::vector{x}),
                           [&](const std::vector<Tensor>& a) { return joined(gru(a[0])); });
  }
  SECTION("size-1 dims, no bias, unbatched") {
    nn::GRU tiny(1, 1, 1, true, false, 0, kFloat64);
    CHECK_MODULE_GRADCHECK(tiny, (std::vector{leaf({1, 1, 1}), leaf({1, 1, 1}, 1)}),
                           [&](const std::vector<Tensor>& a) { return joined(tiny(a[0], a[1])); });
    nn::GRU no_bias(2, 3, nn::GRUOptions{.bias = false, .dtype = kFloat64});
    CHECK_MODULE_GRADCHECK(
        no_bias, (std::vector{leaf({4, 2}), leaf({1, 3}, 1)}),
        [&](const std::vector<Tensor>& a) { return joined(no_bias(a[0], a[1])); });
  }
  SECTION("zero batch") {
    nn::GRU gru(2, 3, 1, true, false, 0, kFloat64);
    auto out = gru(leaf({3, 0, 2}));
    CHECK(out.output.shape() == Shape{3, 0, 3});
    CHECK(out.h_n.shape() == Shape{1, 0, 3});
    CHECK_MODULE_GRADCHECK(gru, (std::vector{leaf({3, 0, 2})}),
                           [&](const std::vector<Tensor>& a) { return joined(gru(a[0])); });
  }
  SECTION("second order") {
    nn::GRU gru(1, 2, 1, true, false, 0, kFloat64);
    CHECK_MODULE_GRADGRADCHECK(
        gru, (std::vector{leaf({2, 1, 1}), leaf({1, 1, 2}, 1)}),
        [&](const std::vector<Tensor>& a) { return joined(gru(a[0], a[1])); });
  }
}

TEST_CASE("GRU: dropout between layers in training only", "[nn]") {
  nn::GRU gru(3, 8, nn::GRUOptions{.num_layers = 2, .dropout = 0.5});
  nn::GRU plain(3, 8, 2);
  plain.load_state_dict(gru.state_dict());
  Tensor x = randn({4, 2, 3});
  CHECK(test::close_excess(gru(x).output, plain(x).output, 1e-4, 0) > 0);
  gru.eval();
  CHECK_CLOSE(gru(x).output, plain(x).output, 0, 0);
  // One layer: nothing sits between layers, so dropout never applies (as in PyTorch).
  nn::GRU one(3, 8, nn::GRUOptions{.dropout = 0.5});
  nn::GRU one_plain(3, 8);
  one_plain.load_state_dict(one.state_dict());
  CHECK_CLOSE(one(x).output, one_plain(x).output, 0, 0);
}

TEST_CASE("GRU: errors name the shapes", "[nn]") {
  nn::GRU gru(3, 4, 2);
  CHECK_THROWS_WITH(gru(randn({5, 2, 2})), Contains("GRU") && Contains("(5, 2, 2)"));
  CHECK_THROWS_WITH(gru(randn({5, 2, 3}), randn({1, 2, 4})),
                    Contains("GRU") && Contains("(2, 2, 4)") && Contains("(1, 2, 4)"));
  CHECK_THROWS_WITH(gru(randn({5, 2, 3}, kFloat64)), Contains("float64") && Contains("float32"));
  CHECK_THROWS_AS(gru(randn({5, 2, 3}), randn({2, 2, 4}, kFloat64)), DTypeError);
  CHECK_THROWS_WITH(gru(randn({0, 2, 3})), Contains("no time steps") && Contains("(0, 2, 3)"));
  CHECK_THROWS_AS(gru(randn({2, 3, 3, 3})), ShapeError);
  CHECK_THROWS_AS(nn::GRU(3, 0), ValueError);
  CHECK_THROWS_AS(nn::GRU(3, 4, nn::GRUOptions{.dropout = 1.5}), ValueError);
}

TEST_CASE("Seq2Seq: d2l's module names and shapes", "[nn]") {
  nn::Seq2SeqEncoder enc(10, 8, 16, {.num_layers = 2});
  auto encoded = enc(tokens(std::vector<int64_t>(4 * 7, 3), {4, 7}));
  CHECK(encoded.output.shape() == Shape{7, 4, 16});
  CHECK(encoded.h_n.shape() == Shape{2, 4, 16});
  auto enc_names = enc.named_parameters();
  CHECK(enc_names[0].first == "embedding.weight");
  CHECK(enc_names[1].first == "rnn.weight_ih_l0");

  nn::AttentionDecoder dec(10, 8, 16, {.num_layers = 2});
  auto names = dec.named_parameters();
  REQUIRE(names.size() == 3 + 1 + 8 + 2);
  CHECK(names[0].first == "attention.W_k.weight");
  CHECK(names[2].first == "attention.w_v.weight");
  CHECK(names[3].first == "embedding.weight");
  CHECK(names[4].first == "rnn.weight_ih_l0");
  CHECK(names[4].second.shape() == Shape{48, 24});  // input [context; embedding] = 16 + 8
  CHECK(names[12].first == "dense.weight");
  CHECK(names[12].second.shape() == Shape{10, 16});

  nn::DecoderState state = dec.init_state(encoded, tokens({3, 2, 7, 5}, {4}));
  CHECK(state.enc_outputs.shape() == Shape{4, 7, 16});
  Tensor logits = dec(tokens(std::vector<int64_t>(4 * 5, 1), {4, 5}), state);
  CHECK(logits.shape() == Shape{4, 5, 10});
  Tensor w = dec.attention_weights();
  REQUIRE(w.shape() == Shape{4, 5, 7});
  CHECK_CLOSE(sum(w, {-1}), ones({4, 5}), 1e-5, 0);
  CHECK(w.select(0, 1).narrow(1, 2, 5).to_vector<float>() == std::vector<float>(25, 0.f));

  CHECK_THROWS_WITH(enc(tokens({1, 2}, {2})), Contains("Seq2SeqEncoder") && Contains("(2,)"));
  CHECK_THROWS_WITH(enc(tokens({1, 12}, {1, 2})), Contains("index 12") && Contains("size 10"));
  CHECK_THROWS_WITH(dec(tokens({1, 10, 1, 1}, {4, 1}), state),
                    Contains("index 10") && Contains("size 10"));
  CHECK_THROWS_WITH(dec(tokens({1, 2}, {1, 2}), state),
                    Contains("AttentionDecoder") && Contains("(1, 2)") && Contains("(4, 7, 16)"));
  CHECK_THROWS_WITH(dec.init_state(encoded, tokens({3, 2}, {2})),
                    Contains("enc_valid_lens") && Contains("(4,)"));
  CHECK_THROWS_AS(nn::EncoderDecoder(std::make_shared<nn::Seq2SeqEncoder>(10, 8, 16),
                                     std::make_shared<nn::AttentionDecoder>(
                                         10, 8, 16, nn::Seq2SeqOptions{.num_layers = 2})),
                  ValueError);
}

TEST_CASE("Seq2Seq: teacher forcing equals decoding step by step; gradcheck", "[nn]") {
  test::check_teacher_forcing_and_gradcheck(*test::make_seq2seq(5, 2, 3, {.dtype = kFloat64}));
}

TEST_CASE("Seq2Seq: learns to reverse short sequences; greedy decoding and its attention", "[nn]") {
  const test::ReversalTask task = test::reversal_task();
  const int64_t V = task.V, S = task.S;
  const Tensor &words = task.words, &tgt_in = task.tgt_in, &tgt_out = task.tgt_out,
               &valid = task.valid;
  const std::vector<int64_t>& tout = task.tgt_out_ids;

  manual_seed(1);
  auto model = test::make_seq2seq(V, 8, 24);
  optim::Adam opt(model->parameters(), {.lr = 0.02});
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy((*model)(words, tgt_in, valid).reshape({-1, V}), tgt_out.flatten());
    if (step == 0) first = loss.item();
    last = loss.item();
    loss.backward();
    opt.step();
  }
  INFO("loss " << first << " -> " << last);
  CHECK(last < 0.1 * first);

  model->train();
  auto decoded = model->greedy_decode(words.select(0, 0), S, 1, 2, 10);
  CHECK(model->is_training());  // restored
  std::vector<int64_t> expect(tout.begin(), tout.begin() + S);
  CHECK(decoded.tokens == expect);
  REQUIRE(decoded.attention.shape() == Shape{S + 1, S});  // the eos step included
  CHECK_CLOSE(sum(decoded.attention, {-1}), ones({S + 1}), 1e-5, 0);
  // A shorter valid length: attention never reaches past it.
  auto clipped = model->greedy_decode(words.select(0, 1), 2, 1, 2, 3);
  CHECK(clipped.tokens.size() <= 3);
  CHECK(clipped.attention.narrow(1, 2, 2).to_vector<float>() ==
        std::vector<float>(static_cast<size_t>(clipped.attention.size(0)) * 2, 0.f));
  CHECK(model->greedy_decode(words.select(0, 0), S, 1, 2, 0).tokens.empty());

  CHECK_THROWS_WITH(model->greedy_decode(words, S, 1, 2, 5),
                    Contains("greedy_decode") && Contains("(24, 4)"));
  CHECK_THROWS_WITH(model->greedy_decode(words.select(0, 0), S, 1, 9, 5),
                    Contains("eos 9") && Contains("[0, 8)"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
