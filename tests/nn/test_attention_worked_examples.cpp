// Attention's textbook examples and claims, checked: a 2x2 scaled dot-product example worked by
// hand, why scale by 1/sqrt(d_k) (Vaswani et al. 2017, section 3.2.1), LocationBasedAttention's
// shapes with the sizes of PyTorch's seq2seq tutorial, Nadaraya-Watson pooling trained as in
// d2l 10.2, and d2l 10.3's masked-softmax examples. Also: a query whose keys are all padding
// gives finite outputs and gradients everywhere.
#include <cmath>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::leaf;

namespace {

Tensor lens(std::vector<int64_t> v, Shape s) { return from_vector<int64_t>(v, s); }

// t[i, j, k] of a 3-D tensor.
double at(const Tensor& t, int64_t i, int64_t j, int64_t k) {
  return t.select(0, i).select(0, j).select(0, k).item();
}

bool all_finite(const Tensor& t) {
  for (double x : t.to(kFloat64).to_vector<double>())
    if (!std::isfinite(x)) return false;
  return true;
}

}  // namespace

TEST_CASE("Dot-product attention on a 2x2 example worked by hand, unscaled and scaled", "[nn]") {
  // Q = [[1, 0], [0, 1]], K = [[1, 2], [3, 4]], V = [[5, 6], [7, 8]], d_k = 2, one batch.
  Tensor Q = tensor({{1, 0}, {0, 1}}, kFloat64).unsqueeze(0);
  Tensor K = tensor({{1, 2}, {3, 4}}, kFloat64).unsqueeze(0);
  Tensor V = tensor({{5, 6}, {7, 8}}, kFloat64).unsqueeze(0);

  // Unscaled: scores of the first query are [1, 3], softmax [0.1192, 0.8808], output
  // 5 * 0.1192 + 7 * 0.8808 = 5 + 2 * 0.8808 = 6.7616, also asserted to the exact value.
  nn::DotProductAttention unscaled(0.0, /*scaled=*/false);
  Tensor out = unscaled(Q, K, V);
  Tensor w = unscaled.attention_weights();
  const double a = 1 / (1 + std::exp(2.0));  // softmax([1, 3])[0]
  CHECK(a == Approx(0.1192).margin(5e-5));
  CHECK(at(w, 0, 0, 0) == Approx(a).epsilon(1e-12));
  CHECK(at(w, 0, 0, 1) == Approx(1 - a).epsilon(1e-12));
  CHECK(at(out, 0, 0, 0) == Approx(6.7616).margin(5e-5));
  CHECK(at(out, 0, 0, 1) == Approx(7.7616).margin(5e-5));
  CHECK_CLOSE(out.select(0, 0).select(0, 0).select(0, 0),
              scalar_tensor(5 * a + 7 * (1 - a), kFloat64), 1e-12, 0);

  // Scaled by 1/sqrt(2): scores [1, 3] / sqrt(2) = [0.7071, 2.1213]. The weights cannot stay
  // 0.1192 / 0.8808: dividing the scores by sqrt(2) shrinks their gap from 2 to sqrt(2), so the
  // weights move towards uniform:
  // softmax = [1 / (1 + e^sqrt(2)), ...] = [0.1956, 0.8044], output [6.6089, 7.6089].
  nn::DotProductAttention scaled;
  out = scaled(Q, K, V);
  w = scaled.attention_weights();
  const double b = 1 / (1 + std::exp(std::sqrt(2.0)));
  CHECK(b == Approx(0.1956).margin(5e-5));
  CHECK(at(w, 0, 0, 0) == Approx(b).epsilon(1e-12));
  CHECK(at(w, 0, 0, 1) == Approx(0.8044).margin(5e-5));
  CHECK(at(out, 0, 0, 0) == Approx(6.6089).margin(5e-5));
  CHECK(at(out, 0, 0, 1) == Approx(7.6089).margin(5e-5));
  // The second query [0, 1] has scores [2, 4]: the same gap, so the same weights.
  CHECK_CLOSE(w.select(0, 0).select(0, 1), w.select(0, 0).select(0, 0), 1e-12, 0);
}

TEST_CASE("q.k has variance d_k; 1/sqrt(d_k) brings it to 1 and unsaturates softmax", "[nn]") {
  Generator gen(7);
  const int64_t N = 4000, d = 64;
  Tensor q = randn({N, d}, gen, kFloat64), k = randn({N, d}, gen, kFloat64);
  Tensor dots = sum(q * k, {-1});  // N samples of q.k with q, k ~ N(0, I)
  const double v = var(dots).item();
  CHECK(v == Approx(double(d)).epsilon(0.1));  // sampling error ~ 2.3%
  CHECK(var(dots / std::sqrt(double(d))).item() == Approx(1.0).epsilon(0.1));

  // Softmax over 10 keys with d = 256: unscaled scores (std 16) put nearly all weight on one key
  // (the saturated regime with vanishing gradients); scaled scores (std 1) do not.
  Tensor Q = randn({50, 1, 256}, gen, kFloat64), K = randn({50, 10, 256}, gen, kFloat64);
  nn::DotProductAttention scaled, unscaled(0.0, false);
  scaled(Q, K, K);
  unscaled(Q, K, K);
  const double max_unscaled = mean(max(unscaled.attention_weights(), -1).values).item();
  const double max_scaled = mean(max(scaled.attention_weights(), -1).values).item();
  CHECK(max_unscaled > 0.9);
  CHECK(max_scaled < 0.6);
}

TEST_CASE("d2l 10.3: masked softmax and both scoring functions on its examples", "[nn]") {
  // masked_softmax(torch.rand(2, 2, 4), torch.tensor([2, 3])): zeros past the valid length.
  Generator gen(3);
  Tensor x = rand({2, 2, 4}, gen, kFloat64);
  Tensor y = masked_softmax(x, lens({2, 3}, {2}));
  CHECK(y.select(0, 0).narrow(1, 2, 2).to_vector<double>() == std::vector<double>(4, 0.0));
  CHECK(y.select(0, 1).narrow(1, 3, 1).to_vector<double>() == std::vector<double>(2, 0.0));
  CHECK_CLOSE(sum(y, {-1}), ones({2, 2}, kFloat64), 1e-12, 0);
  Tensor y2 = masked_softmax(x, lens({1, 3, 2, 4}, {2, 2}));
  CHECK(at(y2, 0, 0, 0) == 1.0);
  CHECK(min(y2.select(0, 1).select(0, 1)).item() > 0);  // valid length 4: every key kept

  // Keys all ones, so every valid key scores the same: the output is the mean of the valid
  // values. values = arange(40).reshape(1, 10, 4) repeated over the batch, valid_lens [2, 6].
  Tensor keys = ones({2, 10, 2}, kFloat64);
  Tensor values = repeat(arange(0, 40, 1, kFloat64).reshape({1, 10, 4}), {2, 1, 1});
  Tensor expect = tensor({{2, 3, 4, 5}, {10, 11, 12, 13}}, kFloat64).unsqueeze(1);

  nn::DotProductAttention dot(0.5);
  dot.eval();
  CHECK_CLOSE(dot(randn({2, 1, 2}, gen, kFloat64), keys, values, lens({2, 6}, {2})), expect, 1e-12,
              0);

  nn::AdditiveAttention add(/*query_size=*/20, /*key_size=*/2, /*num_hiddens=*/8,
                            {.dropout = 0.1, .dtype = kFloat64});
  add.eval();
  CHECK_CLOSE(add(randn({2, 1, 20}, gen, kFloat64), keys, values, lens({2, 6}, {2})), expect, 1e-12,
              0);
  Tensor w = add.attention_weights();  // (2, 1, 10): 1/2 on 2 keys, 1/6 on 6 keys
  CHECK(at(w, 0, 0, 1) == Approx(0.5));
  CHECK(at(w, 1, 0, 5) == Approx(1.0 / 6));
  CHECK(at(w, 1, 0, 6) == 0.0);
}

TEST_CASE("A query whose keys are all padding gives zeros and finite gradients", "[nn]") {
  // d2l's masked_softmax would return a uniform average of the padded values here; nabla's
  // masked softmax returns zero weights (no attention), so the output row is zero.
  Tensor q = leaf({2, 3, 4}), k = leaf({2, 5, 4}, 1), v = leaf({2, 5, 3}, 2);
  Tensor valid = lens({0, 3}, {2});
  SECTION("DotProductAttention") {
    nn::DotProductAttention attn;
    Tensor out = attn(q, k, v, valid);
    CHECK(out.select(0, 0).to_vector<double>() == std::vector<double>(9, 0.0));
    CHECK(all_finite(out));
    sum(out * out).backward();
    for (const Tensor& t : {q, k, v}) CHECK(all_finite(t.grad()));
    CHECK(q.grad().select(0, 0).to_vector<double>() == std::vector<double>(12, 0.0));
    CHECK_GRADCHECK([&](const std::vector<Tensor>& x) { return attn(x[0], x[1], x[2], valid); },
                    (std::vector{q, k, v}));
  }
  SECTION("AdditiveAttention") {
    nn::AdditiveAttention attn(4, 4, 3, {.dtype = kFloat64});
    Tensor out = attn(q, k, v, valid);
    CHECK(out.select(0, 0).to_vector<double>() == std::vector<double>(9, 0.0));
    sum(out * out).backward();
    for (const Tensor& t : {q, k, v}) CHECK(all_finite(t.grad()));
    for (const Tensor& p : attn.parameters()) CHECK(all_finite(p.grad()));
    // A keep mask and an additive mask with every key removed behave the same.
    CHECK(attn(q, k, v, zeros({2, 3, 5}, kBool)).to_vector<double>() ==
          std::vector<double>(18, 0.0));
    CHECK(attn(q, k, v, full({2, 3, 5}, -INFINITY, kFloat64)).to_vector<double>() ==
          std::vector<double>(18, 0.0));
  }
  SECTION("AttentionDecoder") {
    nn::Seq2SeqEncoder enc(6, 3, 4, {.num_layers = 2, .dtype = kFloat64});
    nn::AttentionDecoder dec(6, 3, 4, {.num_layers = 2, .dtype = kFloat64});
    Tensor src = from_vector<int64_t>({1, 2, 3, 4, 5, 1, 2, 3}, {2, 4});
    Tensor tgt = from_vector<int64_t>({0, 1, 2, 0, 3, 4}, {2, 3});
    nn::DecoderState state = dec.init_state(enc(src), lens({0, 2}, {2}));
    Tensor logits = dec(tgt, state);
    REQUIRE(logits.shape() == Shape{2, 3, 6});
    CHECK(all_finite(logits));
    Tensor w = dec.attention_weights();  // (2, 3, 4)
    CHECK(w.select(0, 0).to_vector<double>() == std::vector<double>(12, 0.0));
    sum(logits * logits).backward();
    for (const Tensor& p : enc.parameters()) CHECK(all_finite(p.grad()));
    for (const Tensor& p : dec.parameters()) CHECK(all_finite(p.grad()));
  }
}

TEST_CASE("LocationBasedAttention with one query over 10 value slots", "[nn]") {
  // query_size = key_size = 32, value_size1 = 10, value_size2 = 32, output_size = 32.
  nn::LocationBasedAttention attention(
      {.query_size = 32, .key_size = 32, .value_size1 = 10, .value_size2 = 32, .output_size = 32});
  Tensor Q = randn({1, 1, 32}), K = randn({1, 1, 32}), V = randn({1, 10, 32});
  auto [output, attn_weights] = attention(Q, K, V);
  CHECK(output.shape() == Shape{1, 1, 32});
  CHECK(attn_weights.shape() == Shape{1, 10});
  CHECK(sum(attn_weights).item() == Approx(1.0).epsilon(1e-6));
  CHECK(output.requires_grad());
}

TEST_CASE("Nadaraya-Watson (d2l 10.2): training the kernel width w by SGD lowers the loss",
          "[nn]") {
  // d2l's toy data: 50 sorted x ~ U(0, 5), y = 2 sin(x) + x^0.8 + N(0, 0.5^2). Each training
  // query attends over the other 49 samples (keys and values (50, 49)).
  Generator gen(2026);
  const int64_t n = 50;
  std::vector<double> xs = rand({n}, gen, kFloat64).to_vector<double>();
  for (double& x : xs) x *= 5;
  std::sort(xs.begin(), xs.end());
  std::vector<double> noise = randn({n}, gen, kFloat64).to_vector<double>();
  std::vector<double> ys(xs.size()), keys, values;
  for (size_t i = 0; i < xs.size(); ++i) {
    ys[i] = 2 * std::sin(xs[i]) + std::pow(xs[i], 0.8) + 0.5 * noise[i];
  }
  for (size_t i = 0; i < xs.size(); ++i)
    for (size_t j = 0; j < xs.size(); ++j)
      if (i != j) {
        keys.push_back(xs[j]);
        values.push_back(ys[j]);
      }
  Tensor x_train = from_vector(xs, {n}), y_train = from_vector(ys, {n});
  Tensor K = from_vector(keys, {n, n - 1}), Vt = from_vector(values, {n, n - 1});

  Generator init_gen(0);
  nn::NWKernelRegression net(kFloat64, init_gen);
  optim::SGD opt(net.parameters(), {.lr = 0.5});
  auto loss_fn = [&] { return sum(mse_loss(net(x_train, K, Vt), y_train, Reduction::None)); };
  double first = 0, last = 0;
  for (int epoch = 0; epoch < 5; ++epoch) {
    opt.zero_grad();
    Tensor l = loss_fn();
    if (epoch == 0) first = l.item();
    l.backward();
    opt.step();
  }
  {
    NoGradGuard no_grad;
    last = loss_fn().item();
  }
  INFO("loss " << first << " -> " << last << ", w = " << net.w().item());
  CHECK(last < 0.5 * first);
  Tensor w = net.attention_weights();
  REQUIRE(w.shape() == Shape{n, n - 1});
  CHECK_CLOSE(sum(w, {-1}), ones({n}, kFloat64), 1e-12, 0);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
