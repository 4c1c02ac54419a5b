// LSTM (PyTorch's names, shapes, gate equations, layouts, states, dropout, errors) and the
// bidirectional GRU and LSTM (the reverse direction is the forward cell run backwards in time,
// PyTorch's h_n order), with float64 gradcheck.
#include "nabla/nn/lstm.h"

#include "nabla/nn/gru.h"
#include "tests/helpers.h"
#include "tests/nn/module_gradcheck.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

namespace {

// Every output of a forward as one tensor, for gradcheck.
Tensor joined(const nn::LSTM::Output& o) {
  return cat({o.output.flatten(), o.h_n.flatten(), o.c_n.flatten()});
}
Tensor joined(const nn::GRU::Output& o) { return cat({o.output.flatten(), o.h_n.flatten()}); }

// `to`'s parameter `name` takes `from`'s parameter `from_name`.
void copy_param(nn::Module& to, const std::string& name, const nn::Module& from,
                const std::string& from_name) {
  for (auto& [n, p] : to.named_parameters())
    if (n == name)
      for (auto& [fn, fp] : from.named_parameters())
        if (fn == from_name) {
          NoGradGuard g;
          p.copy_(fp);
          return;
        }
  FAIL("no parameter " << name << " / " << from_name);
}

}  // namespace

TEST_CASE("LSTM: PyTorch's parameter names, shapes and initialisation", "[nn]") {
  nn::LSTM lstm(3, 4, {.num_layers = 2});
  auto params = lstm.named_parameters();
  REQUIRE(params.size() == 8);
  const char* names[] = {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                         "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"};
  const Shape shapes[] = {{16, 3}, {16, 4}, {16}, {16}, {16, 4}, {16, 4}, {16}, {16}};
  for (size_t i = 0; i < 8; ++i) {
    CHECK(params[i].first == names[i]);
    CHECK(params[i].second.shape() == shapes[i]);
    for (float v : params[i].second.to_vector<float>()) CHECK(std::abs(v) <= 0.5f);  // 1/sqrt(4)
  }
  CHECK(nn::LSTM(3, 4, {.bias = false}).named_parameters().size() == 2);
}

TEST_CASE("bidirectional: PyTorch's _reverse names, layer order and input sizes", "[nn]") {
  nn::GRU gru(3, 4, {.num_layers = 2, .bidirectional = true});
  nn::LSTM lstm(3, 4, {.num_layers = 2, .bidirectional = true});
  const char* names[] = {
      "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
      "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
      "weight_ih_l1",         "weight_hh_l1",         "bias_ih_l1",         "bias_hh_l1",
      "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"};
  for (auto* m : {static_cast<nn::RNNBase*>(&gru), static_cast<nn::RNNBase*>(&lstm)}) {
    auto params = m->named_parameters();
    REQUIRE(params.size() == 16);
    const int64_t G = m == &gru ? 12 : 16;
    for (size_t i = 0; i < 16; ++i) CHECK(params[i].first == names[i]);
    CHECK(params[4].second.shape() == Shape{G, 3});
    CHECK(params[8].second.shape() == Shape{G, 8});  // layer 1 reads [forward; reverse]
    CHECK(params[12].second.shape() == Shape{G, 8});
    CHECK(m->num_directions() == 2);
  }
}

TEST_CASE("LSTM: one step matches the gate equations written out", "[nn]") {
  nn::LSTM lstm(3, 2, {.dtype = kFloat64});
  Tensor x = leaf({1, 4, 3}), h0 = leaf({1, 4, 2}, 1), c0 = leaf({1, 4, 2}, 2);
  auto out = lstm(x, {h0, c0});
  REQUIRE(out.output.shape() == Shape{1, 4, 2});
  REQUIRE(out.h_n.shape() == Shape{1, 4, 2});
  REQUIRE(out.c_n.shape() == Shape{1, 4, 2});
  auto p = lstm.named_parameters();
  const Tensor &w_ih = p[0].second, &w_hh = p[1].second, &b_ih = p[2].second, &b_hh = p[3].second;
  Tensor xt = x.select(0, 0), h = h0.select(0, 0), c = c0.select(0, 0);
  auto gate = [&](int g) {  // PyTorch's row blocks: i, f, g, o
    return linear(xt, w_ih.narrow(0, 2 * g, 2), b_ih.narrow(0, 2 * g, 2)) +
           linear(h, w_hh.narrow(0, 2 * g, 2), b_hh.narrow(0, 2 * g, 2));
  };
  Tensor i = sigmoid(gate(0)), f = sigmoid(gate(1)), g = tanh(gate(2)), o = sigmoid(gate(3));
  Tensor c1 = f * c + i * g, h1 = o * tanh(c1);
  CHECK_CLOSE(out.output.select(0, 0), h1, 1e-12, 0);
  CHECK_CLOSE(out.h_n.select(0, 0), h1, 1e-12, 0);
  CHECK_CLOSE(out.c_n.select(0, 0), c1, 1e-12, 0);
}

TEST_CASE("LSTM: layouts agree, states carry over, unbatched is batch 1", "[nn]") {
  nn::LSTM lstm(3, 4, {.num_layers = 2, .dtype = kFloat64});
  nn::LSTM lstm_bf(3, 4, {.num_layers = 2, .batch_first = true, .dtype = kFloat64});
  lstm_bf.load_state_dict(lstm.state_dict());
  Tensor x = leaf({5, 2, 3}), h0 = leaf({2, 2, 4}, 1), c0 = leaf({2, 2, 4}, 2);
  auto a = lstm(x, h0, c0);
  auto b = lstm_bf(x.transpose(0, 1), h0, c0);
  REQUIRE(a.output.shape() == Shape{5, 2, 4});
  REQUIRE(b.output.shape() == Shape{2, 5, 4});
  CHECK_CLOSE(b.output.transpose(0, 1), a.output, 0, 0);
  CHECK_CLOSE(b.c_n, a.c_n, 0, 0);
  CHECK_CLOSE(a.h_n.select(0, 1), a.output.select(0, 4), 0, 0);  // top layer, last step
  CHECK_CLOSE(lstm(x).output,
              lstm(x, zeros({2, 2, 4}, kFloat64), zeros({2, 2, 4}, kFloat64)).output, 0, 0);
  auto u = lstm(x.select(1, 1), h0.select(1, 1), c0.select(1, 1));
  CHECK(u.output.shape() == Shape{5, 4});
  CHECK(u.c_n.shape() == Shape{2, 4});
  CHECK_CLOSE(u.output, a.output.select(1, 1), 1e-12, 0);
  CHECK_CLOSE(u.c_n, a.c_n.select(1, 1), 1e-12, 0);
  auto first = lstm(x.narrow(0, 0, 2), h0, c0);
  auto second = lstm(x.narrow(0, 2, 3), {first.h_n, first.c_n});
  CHECK_CLOSE(second.output, a.output.narrow(0, 2, 3), 1e-12, 0);
  CHECK_CLOSE(second.h_n, a.h_n, 1e-12, 0);
  CHECK_CLOSE(second.c_n, a.c_n, 1e-12, 0);
}

TEST_CASE("bidirectional: the reverse direction is the cell run backwards in time", "[nn]") {
  // A one-direction GRU / LSTM with the _reverse weights, on the time-flipped input, gives the
  // second half of every step's output (flipped back) and the second h_n slot.
  nn::GRU bi(3, 4, {.bidirectional = true, .dtype = kFloat64});
  nn::GRU fwd(3, 4, {.dtype = kFloat64}), rev(3, 4, {.dtype = kFloat64});
  nn::LSTM lbi(3, 4, {.bidirectional = true, .dtype = kFloat64});
  nn::LSTM lfwd(3, 4, {.dtype = kFloat64}), lrev(3, 4, {.dtype = kFloat64});
  for (const char* n : {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"}) {
    copy_param(fwd, n, bi, n);
    copy_param(rev, n, bi, std::string(n) + "_reverse");
    copy_param(lfwd, n, lbi, n);
    copy_param(lrev, n, lbi, std::string(n) + "_reverse");
  }
  Tensor x = leaf({5, 2, 3}), h0 = leaf({2, 2, 4}, 1), c0 = leaf({2, 2, 4}, 2);
  auto b = bi(x, h0);
  auto f = fwd(x, h0.narrow(0, 0, 1));
  auto r = rev(flip(x, {0}), h0.narrow(0, 1, 1));
  REQUIRE(b.output.shape() == Shape{5, 2, 8});
  REQUIRE(b.h_n.shape() == Shape{2, 2, 4});
  CHECK_CLOSE(b.output.narrow(2, 0, 4), f.output, 1e-12, 0);
  CHECK_CLOSE(b.output.narrow(2, 4, 4), flip(r.output, {0}), 1e-12, 0);
  CHECK_CLOSE(b.h_n, cat({f.h_n, r.h_n}, 0), 1e-12, 0);
  // The reverse direction's final state is its output at the first step.
  CHECK_CLOSE(b.h_n.select(0, 1), b.output.select(0, 0).narrow(1, 4, 4), 0, 0);

  auto lb = lbi(x, h0, c0);
  auto lf = lfwd(x, h0.narrow(0, 0, 1), c0.narrow(0, 0, 1));
  auto lr = lrev(flip(x, {0}), h0.narrow(0, 1, 1), c0.narrow(0, 1, 1));
  CHECK_CLOSE(lb.output, cat({lf.output, flip(lr.output, {0})}, 2), 1e-12, 0);
  CHECK_CLOSE(lb.h_n, cat({lf.h_n, lr.h_n}, 0), 1e-12, 0);
  CHECK_CLOSE(lb.c_n, cat({lf.c_n, lr.c_n}, 0), 1e-12, 0);
}

TEST_CASE("LSTM and bidirectional GRU: gradcheck over inputs, states and parameters", "[nn]") {
  SECTION("LSTM, 2 layers, time-major, (h0, c0)") {
    nn::LSTM m(2, 3, {.num_layers = 2, .dtype = kFloat64});
    CHECK_MODULE_GRADCHECK(
        m, (std::vector{leaf({3, 2, 2}), leaf({2, 2, 3}, 1), leaf({2, 2, 3}, 2)}),
        [&](const std::vector<Tensor>& a) { return joined(m(a[0], a[1], a[2])); });
  }
  SECTION("bidirectional LSTM, 2 layers, batch_first, non-contiguous input") {
    nn::LSTM m(3, 2,
               {.num_layers = 2, .batch_first = true, .bidirectional = true, .dtype = kFloat64});
    Tensor x = leaf({3, 4, 2}).detach().transpose(0, 2).requires_grad_();  // (2, 4, 3)
    REQUIRE_FALSE(x.is_contiguous());
    CHECK_MODULE_GRADCHECK(m, (std::vector{x}),
                           [&](const std::vector<Tensor>& a) { return joined(m(a[0])); });
  }
  SECTION("bidirectional GRU, 2 layers, h0") {
    nn::GRU m(2, 3, {.num_layers = 2, .bidirectional = true, .dtype = kFloat64});
    CHECK_MODULE_GRADCHECK(m, (std::vector{leaf({3, 2, 2}), leaf({4, 2, 3}, 1)}),
                           [&](const std::vector<Tensor>& a) { return joined(m(a[0], a[1])); });
  }
  SECTION("size-1 sequence and batch, unbatched, no bias") {
    nn::LSTM one(1, 1, {.bidirectional = true, .dtype = kFloat64});
    CHECK_MODULE_GRADCHECK(
        one, (std::vector{leaf({1, 1, 1}), leaf({2, 1, 1}, 1), leaf({2, 1, 1}, 2)}),
        [&](const std::vector<Tensor>& a) { return joined(one(a[0], a[1], a[2])); });
    nn::GRU gone(2, 2, {.bidirectional = true, .dtype = kFloat64});
    CHECK_MODULE_GRADCHECK(gone, (std::vector{leaf({1, 1, 2}), leaf({2, 1, 2}, 1)}),
                           [&](const std::vector<Tensor>& a) { return joined(gone(a[0], a[1])); });
    nn::LSTM unbatched(2, 3, {.bias = false, .bidirectional = true, .dtype = kFloat64});
    CHECK_MODULE_GRADCHECK(
        unbatched, (std::vector{leaf({4, 2}), leaf({2, 3}, 1), leaf({2, 3}, 2)}),
        [&](const std::vector<Tensor>& a) { return joined(unbatched(a[0], a[1], a[2])); });
  }
  SECTION("zero batch") {
    nn::LSTM m(2, 3, {.bidirectional = true, .dtype = kFloat64});
    auto out = m(leaf({3, 0, 2}));
    CHECK(out.output.shape() == Shape{3, 0, 6});
    CHECK(out.c_n.shape() == Shape{2, 0, 3});
    CHECK_MODULE_GRADCHECK(m, (std::vector{leaf({3, 0, 2})}),
                           [&](const std::vector<Tensor>& a) { return joined(m(a[0])); });
  }
  SECTION("second order") {
    nn::LSTM m(1, 2, {.dtype = kFloat64});
    CHECK_MODULE_GRADGRADCHECK(
        m, (std::vector{leaf({2, 1, 1}), leaf({1, 1, 2}, 1), leaf({1, 1, 2}, 2)}),
        [&](const std::vector<Tensor>& a) { return joined(m(a[0], a[1], a[2])); });
  }
}

TEST_CASE("LSTM: dropout between layers in training only", "[nn]") {
  nn::LSTM m(3, 8, {.num_layers = 2, .dropout = 0.5, .bidirectional = true});
  nn::LSTM plain(3, 8, {.num_layers = 2, .bidirectional = true});
  plain.load_state_dict(m.state_dict());
  Tensor x = randn({4, 2, 3});
  CHECK(test::close_excess(m(x).output, plain(x).output, 1e-4, 0) > 0);
  m.eval();
  CHECK_CLOSE(m(x).output, plain(x).output, 0, 0);
}

TEST_CASE("LSTM and bidirectional GRU: errors name the shapes", "[nn]") {
  nn::LSTM lstm(3, 4, {.num_layers = 2});
  CHECK_THROWS_WITH(lstm(randn({5, 2, 2})),
                    Contains("LSTM") && Contains("(T, B, 3)") && Contains("(5, 2, 2)"));
  CHECK_THROWS_WITH(
      lstm(randn({5, 2, 3}), randn({1, 2, 4}), randn({2, 2, 4})),
      Contains("LSTM") && Contains("h0") && Contains("(2, 2, 4)") && Contains("(1, 2, 4)"));
  CHECK_THROWS_WITH(lstm(randn({5, 2, 3}), randn({2, 2, 4}), randn({2, 3, 4})),
                    Contains("LSTM") && Contains("c0") && Contains("(2, 3, 4)"));
  CHECK_THROWS_WITH(lstm(randn({5, 2, 3}), randn({2, 2, 4})),
                    Contains("LSTM") && Contains("h0 and c0") && Contains("h0 only"));
  CHECK_THROWS_WITH(lstm(randn({5, 2, 3}, kFloat64)), Contains("float64") && Contains("float32"));
  CHECK_THROWS_WITH(lstm(randn({0, 2, 3})), Contains("no time steps"));
  CHECK_THROWS_AS(nn::LSTM(0, 4), ValueError);
  CHECK_THROWS_AS(nn::LSTM(3, 4, {.dropout = -0.1}), ValueError);
  CHECK_THROWS_AS(nn::LSTM(3, 4, {.dtype = kInt64}), DTypeError);

  nn::GRU bi(3, 4, {.bidirectional = true});
  // A unidirectional-sized h0: PyTorch's (num_layers * 2, B, H) is asked for.
  CHECK_THROWS_WITH(bi(randn({5, 2, 3}), randn({1, 2, 4})),
                    Contains("GRU") && Contains("(2, 2, 4)") && Contains("(1, 2, 4)"));
  CHECK_THROWS_WITH(bi(randn({5, 3}), randn({2, 2, 4})),
                    Contains("GRU") && Contains("(2, 4)") && Contains("(2, 2, 4)"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
