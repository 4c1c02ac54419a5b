// Attention scoring modules and Nadaraya-Watson pooling: values against literal
// implementations, masks, stored weights, gradcheck on every mask kind and layout, errors.
#include "nabla/nn/attention.h"

#include "nabla/nn/attention_pooling.h"
#include "tests/helpers.h"
#include "tests/nn/module_gradcheck.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::leaf;

namespace {

Tensor lens(std::vector<int64_t> v, Shape s) { return from_vector<int64_t>(v, s); }

// The masked softmax spelled out: scores with removed keys set to -inf, then softmax; a row with
// nothing kept is zeros.
Tensor reference_attention(const Tensor& scores, const Tensor& keep, const Tensor& values) {
  Tensor s = masked_fill(scores.detach(), logical_not(keep), -INFINITY);
  Tensor w = where(keep, softmax(s, -1), 0.0);
  return matmul(w, values.detach());
}

// keep mask (B, Q, K) from valid lengths (B,).
Tensor keep_from_lens(const std::vector<int64_t>& v, int64_t Q, int64_t K) {
  Tensor keep = zeros({static_cast<int64_t>(v.size()), Q, K}, kBool);
  bool* p = keep.data_ptr<bool>();
  for (size_t b = 0; b < v.size(); ++b)
    for (int64_t q = 0; q < Q; ++q)
      for (int64_t k = 0; k < K; ++k) p[(static_cast<int64_t>(b) * Q + q) * K + k] = k < v[b];
  return keep;
}

}  // namespace

TEST_CASE("AdditiveAttention: d2l's parameters, values and masks", "[nn]") {
  nn::AdditiveAttention attn(/*query_size=*/5, /*key_size=*/3, /*num_hiddens=*/4,
                             {.dtype = kFloat64});
  auto params = attn.named_parameters();
  REQUIRE(params.size() == 3);
  CHECK(params[0].first == "W_k.weight");
  CHECK(params[0].second.shape() == Shape{4, 3});
  CHECK(params[1].first == "W_q.weight");
  CHECK(params[1].second.shape() == Shape{4, 5});
  CHECK(params[2].first == "w_v.weight");
  CHECK(params[2].second.shape() == Shape{1, 4});
  CHECK(attn.attention_weights().defined() == false);

  Tensor q = leaf({2, 3, 5}, 1), k = leaf({2, 4, 3}, 2), v = leaf({2, 4, 6}, 3);
  // Scores written out for one (b, q, k): w_v . tanh(W_q q + W_k k).
  Tensor s = attn.scores(q, k);
  REQUIRE(s.shape() == Shape{2, 3, 4});
  Tensor hq = matmul(params[1].second, q.select(0, 1).select(0, 2));
  Tensor hk = matmul(params[0].second, k.select(0, 1).select(0, 3));
  Tensor expect = matmul(params[2].second, tanh(hq + hk));
  CHECK_CLOSE(s.select(0, 1).select(0, 2).select(0, 3).reshape({1}), expect, 1e-12, 0);

  Tensor out = attn(q, k, v, lens({2, 4}, {2}));
  REQUIRE(out.shape() == Shape{2, 3, 6});
  CHECK_CLOSE(out, reference_attention(s, keep_from_lens({2, 4}, 3, 4), v), 1e-12, 0);
  Tensor wts = attn.attention_weights();
  REQUIRE(wts.shape() == Shape{2, 3, 4});
  CHECK_FALSE(wts.requires_grad());
  CHECK_CLOSE(sum(wts, {-1}), ones({2, 3}, kFloat64), 1e-12, 0);
  CHECK(wts.select(0, 0).narrow(1, 2, 2).to_vector<double>() == std::vector<double>(6, 0.0));

  // Per-query lengths, a keep mask and an additive mask agree with the reference.
  Tensor keep = keep_from_lens({1, 3}, 3, 4);
  CHECK_CLOSE(attn(q, k, v, lens({1, 1, 1, 3, 3, 3}, {2, 3})), reference_attention(s, keep, v),
              1e-12, 0);
  CHECK_CLOSE(attn(q, k, v, keep), reference_attention(s, keep, v), 1e-12, 0);
  Tensor additive = where(keep, 0.0, full({2, 3, 4}, -INFINITY, kFloat64));
  CHECK_CLOSE(attn(q, k, v, additive), reference_attention(s, keep, v), 1e-12, 0);
  CHECK_CLOSE(attn(q, k, v, Tensor()), matmul(softmax(s, -1), v), 1e-12, 0);
}

// fn for module_gradcheck: the module on (queries, keys, values) with a fixed mask.
template <class M>
auto attend_with(M& m, nn::AttentionMask mask) {
  return [&m, mask](const std::vector<Tensor>& x) { return m(x[0], x[1], x[2], mask); };
}

TEST_CASE("AdditiveAttention: gradcheck over inputs and parameters", "[nn]") {
  nn::AdditiveAttention attn(2, 3, 4, {.dtype = kFloat64});
  SECTION("valid_lens (B,)") {
    CHECK_MODULE_GRADCHECK(attn,
                           (std::vector{leaf({2, 3, 2}), leaf({2, 4, 3}, 1), leaf({2, 4, 2}, 2)}),
                           attend_with(attn, lens({2, 4}, {2})));
  }
  SECTION("size-1 dims, no mask") {
    CHECK_MODULE_GRADCHECK(attn,
                           (std::vector{leaf({1, 1, 2}), leaf({1, 1, 3}, 1), leaf({1, 1, 1}, 2)}),
                           attend_with(attn, {}));
  }
  SECTION("transposed non-contiguous inputs, valid_lens (B, Q)") {
    Tensor q = leaf({2, 2, 3}).detach().transpose(1, 2).requires_grad_();
    Tensor k = leaf({2, 3, 4}, 1).detach().transpose(1, 2).requires_grad_();
    Tensor v = leaf({4, 2, 2}, 2).detach().transpose(0, 1).requires_grad_();
    REQUIRE_FALSE(q.is_contiguous());
    CHECK_MODULE_GRADCHECK(attn, (std::vector{q, k, v}),
                           attend_with(attn, lens({1, 2, 4, 3, 3, 1}, {2, 3})));
  }
  SECTION("bool mask broadcast over queries") {
    Tensor keep = gt(from_vector<int64_t>({1, 0, 1, 1, 0, 1, 1, 1}, {2, 1, 4}), 0.0);
    CHECK_MODULE_GRADCHECK(attn,
                           (std::vector{leaf({2, 3, 2}), leaf({2, 4, 3}, 1), leaf({2, 4, 2}, 2)}),
                           attend_with(attn, keep));
  }
  SECTION("additive mask gets a gradient too") {
    Tensor add_mask = leaf({2, 1, 4}, 5);
    CHECK_MODULE_GRADCHECK(
        attn, (std::vector{leaf({2, 3, 2}), leaf({2, 4, 3}, 1), leaf({2, 4, 2}, 2), add_mask}),
        [&](const std::vector<Tensor>& x) {
          return attn(x[0], x[1], x[2], nn::AttentionMask::additive(x[3]));
        });
  }
  SECTION("zero keys") {
    Tensor out = attn(leaf({2, 3, 2}), leaf({2, 0, 3}, 1), leaf({2, 0, 2}, 2));
    CHECK(out.shape() == Shape{2, 3, 2});
    CHECK(out.to_vector<double>() == std::vector<double>(12, 0.0));
    CHECK_MODULE_GRADCHECK(attn,
                           (std::vector{leaf({2, 3, 2}), leaf({2, 0, 3}, 1), leaf({2, 0, 2}, 2)}),
                           attend_with(attn, {}));
  }
  SECTION("second order") {
    nn::AdditiveAttention small(2, 2, 2, {.dtype = kFloat64});
    CHECK_MODULE_GRADGRADCHECK(
        small, (std::vector{leaf({1, 2, 2}), leaf({1, 3, 2}, 1), leaf({1, 3, 2}, 2)}),
        attend_with(small, lens({2}, {1})));
  }
}

TEST_CASE("DotProductAttention: scaling, batch dims, gradcheck", "[nn]") {
  nn::DotProductAttention scaled, unscaled(0.0, false);
  CHECK(scaled.parameters().empty());
  Tensor q = leaf({2, 3, 4}), k = leaf({2, 5, 4}, 1), v = leaf({2, 5, 3}, 2);
  Tensor raw = matmul(q, k.mT());
  CHECK_CLOSE(scaled.scores(q, k), raw / 2.0, 1e-12, 0);  // 1/sqrt(4)
  CHECK_CLOSE(unscaled.scores(q, k), raw, 1e-12, 0);
  CHECK_CLOSE(scaled(q, k, v, lens({3, 5}, {2})),
              reference_attention(raw / 2.0, keep_from_lens({3, 5}, 3, 5), v), 1e-12, 0);

  // Extra leading dims (B, h, Q, d), e.g. heads; valid_lens (B,) masks every head alike.
  Tensor q4 = leaf({2, 2, 3, 4}, 3), k4 = leaf({2, 2, 5, 4}, 4), v4 = leaf({2, 2, 5, 3}, 5);
  Tensor out4 = scaled(q4, k4, v4, lens({2, 4}, {2}));
  REQUIRE(out4.shape() == Shape{2, 2, 3, 3});
  Tensor head = scaled(q4.select(1, 1), k4.select(1, 1), v4.select(1, 1), lens({2, 4}, {2}));
  CHECK_CLOSE(out4.select(1, 1), head, 1e-12, 0);

  SECTION("gradcheck: lens (B,)") {
    CHECK_GRADCHECK(attend_with(scaled, lens({3, 5}, {2})), (std::vector{q, k, v}));
  }
  SECTION("gradcheck: unscaled, transposed keys, lens (B, Q)") {
    Tensor kt = leaf({2, 4, 5}, 6).detach().transpose(1, 2).requires_grad_();
    CHECK_GRADCHECK(attend_with(unscaled, lens({1, 2, 3, 5, 4, 3}, {2, 3})),
                    (std::vector{q, kt, v}));
  }
  SECTION("gradcheck: size-1 dims, 4-D, zero queries") {
    CHECK_GRADCHECK(attend_with(scaled, {}),
                    (std::vector{leaf({1, 1, 1}), leaf({1, 1, 1}, 1), leaf({1, 1, 2}, 2)}));
    CHECK_GRADCHECK(attend_with(scaled, lens({2, 4}, {2})), (std::vector{q4, k4, v4}));
    CHECK_GRADCHECK(attend_with(scaled, {}), (std::vector{leaf({2, 0, 4}), k, v}));
  }
  SECTION("second order") {
    CHECK_GRADGRADCHECK(attend_with(scaled, lens({2}, {1})),
                        (std::vector{leaf({1, 2, 3}), leaf({1, 3, 3}, 1), leaf({1, 3, 2}, 2)}));
  }
}

TEST_CASE("Attention dropout acts on the weights in training only", "[nn]") {
  nn::DotProductAttention attn(0.5);
  Tensor q = randn({2, 4, 8}), k = randn({2, 16, 8}), v = ones({2, 16, 1});
  Tensor train_out = attn(q, k, v);
  CHECK_CLOSE(sum(attn.attention_weights(), {-1}), ones({2, 4}), 1e-5, 0);  // before dropout
  attn.eval();
  Tensor eval_out = attn(q, k, v);
  CHECK_CLOSE(eval_out, ones({2, 4, 1}), 1e-5, 0);  // weights sum to 1, values are 1
  CHECK(test::close_excess(train_out, eval_out, 1e-3, 0) > 0);
  CHECK(attn.dropout_p() == 0.5);
}

TEST_CASE("Scores of the concatenation [q; k] as modules", "[nn]") {
  Tensor q = leaf({2, 3, 5}), k = leaf({2, 4, 3}, 1), v = leaf({2, 4, 2}, 2);
  // Literal concatenation [q_i; k_j] for every pair: (B, Q, K, dq + dk).
  Tensor pairs =
      cat({q.unsqueeze(2).expand({2, 3, 4, 5}), k.unsqueeze(1).expand({2, 3, 4, 3})}, -1);

  SECTION("ConcatLinearAttention: softmax(Linear([Q, K])) V") {
    nn::ConcatLinearAttention attn(5, 3, {.dtype = kFloat64});
    auto params = attn.named_parameters();
    REQUIRE(params.size() == 2);
    CHECK(params[0].first == "linear.weight");
    CHECK(params[0].second.shape() == Shape{1, 8});
    Tensor literal = linear(pairs, params[0].second, params[1].second).squeeze(-1);
    CHECK_CLOSE(attn.scores(q, k), literal, 1e-12, 0);
    Tensor out = attn(q, k, v, lens({3, 4}, {2}));
    CHECK_CLOSE(out, reference_attention(literal, keep_from_lens({3, 4}, 3, 4), v), 1e-12, 0);
    // The query's term cancels in the softmax: every query gets the same weights, and the
    // queries get no gradient.
    Tensor w = attn.attention_weights();
    CHECK_CLOSE(w.select(1, 0), w.select(1, 2), 1e-12, 0);
    auto g = autograd::grad({sum(out * out)}, {q}, {}, false, false, true);
    CHECK((!g[0].defined() || test::close_excess(g[0], zeros_like(q), 1e-12, 0) <= 0));
    CHECK_MODULE_GRADCHECK(attn, (std::vector{q, k, v}), attend_with(attn, lens({3, 4}, {2})));
    Tensor kt = leaf({2, 3, 4}, 3).detach().transpose(1, 2).requires_grad_();
    CHECK_MODULE_GRADCHECK(attn, (std::vector{q, kt, v}), attend_with(attn, {}));
  }
  SECTION("ConcatTanhSumAttention: softmax(sum(tanh(Linear([Q, K])))) V") {
    nn::ConcatTanhSumAttention attn(5, 3, 6, {.dtype = kFloat64});
    auto params = attn.named_parameters();
    REQUIRE(params.size() == 2);
    CHECK(params[0].second.shape() == Shape{6, 8});
    CHECK(params[1].first == "linear.bias");
    Tensor literal = sum(tanh(linear(pairs, params[0].second, params[1].second)), {-1});
    CHECK_CLOSE(attn.scores(q, k), literal, 1e-12, 0);
    CHECK_CLOSE(attn(q, k, v), matmul(softmax(literal, -1), v), 1e-12, 0);
    CHECK_MODULE_GRADCHECK(attn, (std::vector{q, k, v}), attend_with(attn, lens({1, 4}, {2})));
    CHECK_MODULE_GRADCHECK(attn,
                           (std::vector{leaf({1, 1, 5}), leaf({1, 1, 3}, 1), leaf({1, 1, 2}, 2)}),
                           attend_with(attn, {}));
  }
}

TEST_CASE("Attention modules reject bad shapes, dtypes and masks", "[nn]") {
  nn::AdditiveAttention add(/*query_size=*/2, /*key_size=*/3, /*num_hiddens=*/4);
  nn::DotProductAttention dot;
  Tensor q = randn({2, 3, 2}), k = randn({2, 4, 3}), v = randn({2, 4, 5});
  CHECK_THROWS_WITH(add(randn({3, 2}), k, v),
                    Contains("AdditiveAttention") && Contains("(3, 2)") && Contains("(2, 4, 3)"));
  CHECK_THROWS_AS(add(q, k, randn({2, 5, 5})), ShapeError);
  CHECK_THROWS_WITH(add(randn({2, 3, 4}), k, v), Contains("query size 2") && Contains("(2, 3, 4)"));
  CHECK_THROWS_AS(add(q.to(kFloat64), k, v), DTypeError);
  CHECK_THROWS_WITH(dot(q, k, v), Contains("DotProductAttention") && Contains("(2, 3, 2)") &&
                                      Contains("(2, 4, 3)"));
  CHECK_THROWS_WITH(dot(randn({2, 3, 3}), k, randn({3, 4, 5})), Contains("(3, 4, 5)"));
  // masks
  CHECK_THROWS_WITH(add(q, k, v, lens({1, 2, 3}, {3})),
                    Contains("AdditiveAttention") && Contains("valid_lens") && Contains("(3,)"));
  CHECK_THROWS_WITH(add(q, k, v, lens({1, 2}, {1, 2})), Contains("(1, 2)"));
  CHECK_THROWS_AS(add(q, k, v, lens({-1, 2}, {2})), ValueError);
  CHECK_THROWS_WITH(add(q, k, v, zeros({2, 3, 5}, kBool)), Contains("AdditiveAttention") &&
                                                               Contains("(2, 3, 5)") &&
                                                               Contains("(2, 3, 4)"));
  CHECK_THROWS_WITH(add(q, k, v, nn::AttentionMask::additive(zeros({4}, kFloat64))),
                    Contains("float64") && Contains("float32"));
  CHECK_THROWS_AS(add(q, k, v, nn::AttentionMask::keep(zeros({4}))), DTypeError);
  CHECK_THROWS_AS(nn::ConcatLinearAttention(2, 3)(q, randn({2, 4, 4}), v), ShapeError);
}

TEST_CASE("LocationBasedAttention: softmax(attn([q; k])) @ V, then attn_combine([q; context])",
          "[nn]") {
  nn::LocationBasedAttention att({.query_size = 3,
                                  .key_size = 2,
                                  .value_size1 = 4,
                                  .value_size2 = 5,
                                  .output_size = 6,
                                  .dtype = kFloat64});
  auto names = att.named_parameters();
  REQUIRE(names.size() == 4);
  CHECK(names[0].first == "attn.weight");
  CHECK(names[0].second.shape() == Shape{4, 5});
  CHECK(names[2].first == "attn_combine.weight");
  CHECK(names[2].second.shape() == Shape{6, 8});
  Tensor Q = leaf({1, 1, 3}), K = leaf({1, 1, 2}, 1), V = leaf({1, 4, 5}, 2);
  auto [out, weights] = att(Q, K, V);
  Tensor q0 = Q.reshape({3}), k0 = K.reshape({2});
  Tensor w = softmax(linear(cat({q0, k0}), names[0].second, names[1].second), 0);
  CHECK_CLOSE(weights, w.unsqueeze(0), 1e-12, 0);
  Tensor applied = matmul(w, V.select(0, 0));  // (5)
  Tensor expect = linear(cat({q0, applied}), names[2].second, names[3].second);
  CHECK_CLOSE(out, expect.reshape({1, 1, 6}), 1e-12, 0);
  CHECK_MODULE_GRADCHECK(att, (std::vector{Q, K, V}), [&](const std::vector<Tensor>& x) {
    return att(x[0], x[1], x[2]).output;
  });
  // N = 3 queries at once (Q[0] is (N, q)).
  auto many = att(leaf({1, 3, 3}, 3), leaf({1, 3, 2}, 4), V);
  CHECK(many.output.shape() == Shape{1, 3, 6});
  CHECK(many.weights.shape() == Shape{3, 4});
  CHECK_THROWS_WITH(att(leaf({2, 1, 3}), K, V), Contains("LocationBasedAttention") &&
                                                    Contains("(2, 1, 3)") && Contains("(1, 4, 5)"));
}

TEST_CASE("Nadaraya-Watson pooling: weights, values and gradients", "[nn]") {
  nn::NadarayaWatson nw;
  Tensor x = tensor({0.0, 1.0, 2.5}, kFloat64), keys = tensor({0.0, 1.0, 2.0, 3.0}, kFloat64);
  Tensor values = tensor({1.0, 2.0, 3.0, 4.0}, kFloat64);
  Tensor out = nw(x, keys, values);
  REQUIRE(out.shape() == Shape{3});
  Tensor w = nw.attention_weights();
  REQUIRE(w.shape() == Shape{3, 4});
  // Row 0: weights proportional to exp(-k^2 / 2).
  std::vector<double> e = {1.0, std::exp(-0.5), std::exp(-2.0), std::exp(-4.5)};
  double s = e[0] + e[1] + e[2] + e[3];
  for (int i = 0; i < 4; ++i)
    CHECK(w.select(0, 0).select(0, i).item() == Approx(e[static_cast<size_t>(i)] / s));
  CHECK(out.select(0, 0).item() == Approx((e[0] * 1 + e[1] * 2 + e[2] * 3 + e[3] * 4) / s));
  // The query 2.5 sits between keys 2 and 3: they get equal, largest weight.
  CHECK(w.select(0, 2).select(0, 2).item() == Approx(w.select(0, 2).select(0, 3).item()));
  CHECK(w.select(0, 2).select(0, 2).item() > w.select(0, 2).select(0, 1).item());
  // (Q, K) keys: each query its own row.
  Tensor keys2 = stack({keys, keys + 1.0, keys - 1.0});
  Tensor out2 = nw(x, keys2, stack({values, values, values}));
  CHECK(out2.select(0, 0).item() == Approx(out.select(0, 0).item()));

  nn::NWKernelRegression reg(kFloat64);
  REQUIRE(reg.named_parameters().size() == 1);
  CHECK(reg.named_parameters()[0].first == "w");
  CHECK(reg.w().shape() == Shape{1});
  const double w0 = reg.w().item();
  CHECK((w0 >= 0 && w0 < 1));
  {
    NoGradGuard no_grad;
    Tensor width = reg.w();
    width.fill_(1.0);
  }
  CHECK_CLOSE(reg(x, keys, values), out, 1e-12, 0);  // w = 1 is the non-parametric estimator

  CHECK_GRADCHECK([&](const std::vector<Tensor>& a) { return nw(a[0], a[1], a[2]); },
                  (std::vector{leaf({3}), leaf({4}, 1), leaf({4}, 2)}));
  CHECK_GRADCHECK([&](const std::vector<Tensor>& a) { return nw(a[0], a[1], a[2]); },
                  (std::vector{leaf({1}), leaf({1, 1}, 1), leaf({1, 1}, 2)}));
  Tensor kt = leaf({4, 3}, 3).detach().t().requires_grad_();
  CHECK_MODULE_GRADCHECK(reg, (std::vector{leaf({3}), kt, leaf({3, 4}, 2)}),
                         [&](const std::vector<Tensor>& a) { return reg(a[0], a[1], a[2]); });
  CHECK_MODULE_GRADGRADCHECK(reg, (std::vector{leaf({2}), leaf({3}, 1), leaf({3}, 2)}),
                             [&](const std::vector<Tensor>& a) { return reg(a[0], a[1], a[2]); });
  CHECK(nw(zeros({0}, kFloat64), keys, values).shape() == Shape{0});

  CHECK_THROWS_WITH(nw(x, keys, values.narrow(0, 0, 3)),
                    Contains("NadarayaWatson") && Contains("(4,)") && Contains("(3,)"));
  CHECK_THROWS_WITH(nw(x, stack({keys, keys}), stack({values, values})), Contains("(2, 4)"));
  CHECK_THROWS_AS(reg(x.to(kFloat32), keys, values), DTypeError);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
