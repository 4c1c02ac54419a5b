// Dynamic int8 quantisation (nn/quantized.h): QuantizedLinear and MultiheadAttention's input
// projections against float within the quantisation error bound, the 4x smaller weights, the
// vectorised activation quantisation against its scalar formula, quantize_dynamic on a Transformer
// encoder, and the inference-only and stale-weight errors.
#include "nabla/nn/quantized.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "nabla/core/machine.h"
#include "nabla/core/parallel.h"
#include "nabla/ops/kernels/onednn.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

#define REQUIRE_ONEDNN()                                                         \
  if (!onednn::available()) {                                                    \
    CHECK_THROWS_WITH(nn::quantize_dynamic(*std::make_shared<nn::Linear>(2, 2)), \
                      Contains("built without oneDNN"));                         \
    return;                                                                      \
  }

// Per output element, with x^ = s_x (q_x - z), |x - x^| <= s_x / 2 and W^ = s_w q_w,
// |w - w^| <= s_w / 2, and x w - x^ w^ = (x - x^) w + x (w - w^) - (x - x^)(w - w^):
//   |y - y^| <= sum_t (s_x / 2 |w_t| + s_w / 2 |x_t| + s_x s_w / 4)
// plus float32 rounding of the scaling (relative 1e-5 of sum |x_t w_t| + |y|).
// `got` = the int8 result for x (.., in) through weight (out, in), bias (out) (undefined: none)
// with per-row scales w_scales.
void check_bound(const Tensor& weight, const Tensor& bias, const Tensor& x, const Tensor& got,
                 const std::vector<float>& w_scales, bool reduce_range) {
  const int64_t in = weight.size(1), out = weight.size(0);
  const auto xv = x.contiguous().to_vector<float>();
  const auto wv = weight.contiguous().to_vector<float>();
  const auto bv =
      bias.defined() ? bias.contiguous().to_vector<float>() : std::vector<float>(out, 0.0f);
  const auto gv = got.contiguous().to_vector<float>();
  REQUIRE(static_cast<int64_t>(w_scales.size()) == out);
  float lo = 0, hi = 0;
  for (float v : xv) lo = std::min(lo, v), hi = std::max(hi, v);
  const double s_x = nn::choose_activation_quantization(lo, hi, reduce_range).scale;
  const int64_t rows = in > 0 ? x.numel() / in : 0;
  double worst_ratio = 0, max_err = 0, max_y = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < out; ++j) {
      const double s_w = w_scales[j];
      double y = bv[j], bound = 0, mag = std::fabs(bv[j]);
      for (int64_t t = 0; t < in; ++t) {
        const double xt = xv[i * in + t], wt = wv[j * in + t];
        y += xt * wt;
        mag += std::fabs(xt * wt);
        bound += s_x / 2 * std::fabs(wt) + s_w / 2 * std::fabs(xt) + s_x * s_w / 4;
      }
      bound += 1e-5 * (mag + std::fabs(y)) + 1e-6;
      const double err = std::fabs(gv[i * out + j] - y);
      worst_ratio = std::max(worst_ratio, err / bound);
      max_err = std::max(max_err, err), max_y = std::max(max_y, std::fabs(y));
    }
  CAPTURE(in, out, rows, reduce_range, max_err, max_y);
  CHECK(worst_ratio <= 1.0);
  // Not vacuous: the int8 result is a close approximation of the float one.
  CHECK(max_err <= 0.05 * max_y + 1e-6);
}

void check_within_bound(const nn::Linear& linear, const nn::QuantizedLinear& q, const Tensor& x) {
  NoGradGuard no_grad;
  check_bound(linear.weight(), linear.bias(), x, q.forward(x), q.weight_scales(), q.reduce_range());
}

}  // namespace

TEST_CASE("QuantizedLinear: within the quantisation error bound of the float Linear",
          "[quantized]") {
  REQUIRE_ONEDNN();
  manual_seed(11);
  struct Case {
    int64_t in, out;
    Shape x;
    bool bias;
  };
  const std::vector<Case> cases = {{1, 1, {1, 1}, true},      {37, 19, {5, 7, 37}, true},
                                   {64, 48, {33, 64}, false}, {128, 96, {2, 16, 128}, true},
                                   {9, 5, {9}, true},         {16, 8, {3, 16}, true}};
  for (const Case& c : cases)
    for (bool reduce : {false, true}) {
      nn::Linear linear(c.in, c.out, c.bias);
      const nn::QuantizedLinear q(linear, {.reduce_range = reduce});
      CHECK(q.reduce_range() == reduce);
      Tensor x = randn(c.x) * 2.0;
      check_within_bound(linear, q, x);
      // A non-contiguous input (a transposed view) gives the same values.
      if (c.x.size() == 2 && c.x[0] > 1) {
        Tensor xt = randn({c.x[1], c.x[0]}).transpose(0, 1);
        check_within_bound(linear, q, xt);
      }
    }
}

TEST_CASE("QuantizedLinear: the weight is 4x smaller, one scale per output channel",
          "[quantized]") {
  REQUIRE_ONEDNN();
  nn::Linear linear(128, 64);
  const nn::QuantizedLinear q(linear);
  const int64_t float_bytes = linear.weight().numel() * 4;
  const std::vector<int8_t>& w8 = q.weight_int8();
  // The model's int8 weight: out x in bytes, unpadded, a quarter of the float32 weight's bytes.
  CHECK(q.weight_bytes() == 64 * 128);
  CHECK(static_cast<int64_t>(w8.size()) == q.weight_bytes());
  CHECK(static_cast<double>(float_bytes) / static_cast<double>(q.weight_bytes()) >= 3.95);
  // Counted apart: one float32 scale per output channel (with them the layer is
  // 4 * 128 / (128 + 4) = 3.88x smaller).
  CHECK(q.weight_scales().size() == 64);
  CHECK(q.scale_bytes() == 64 * 4);
  CHECK(float_bytes * 132 == (q.weight_bytes() + q.scale_bytes()) * 4 * 128);
  // The runtime cache (oneDNN's packed layout, padded, with column sums) holds the same values.
  CHECK(q.cache_bytes() == q.packed_weight().packed_bytes());
  CHECK(q.cache_bytes() >= q.weight_bytes());
  CHECK(q.packed_weight().unpack() == w8);
  // Symmetric per row: the largest |w| of each row maps to +-127, and w ~ q * scale.
  const auto w = linear.weight().to_vector<float>();
  for (int64_t j = 0; j < 64; ++j) {
    int max_q = 0;
    for (int64_t t = 0; t < 128; ++t) {
      max_q = std::max(max_q, std::abs(int{w8[j * 128 + t]}));
      CHECK(std::fabs(w8[j * 128 + t] * q.weight_scales()[j] - w[j * 128 + t]) <=
            q.weight_scales()[j] * 0.5001);
    }
    CHECK(max_q == 127);
  }
}

TEST_CASE("QuantizedLinear: activation range, zero rows, empty and edge inputs", "[quantized]") {
  REQUIRE_ONEDNN();
  // PyTorch's choose_qparams: 0 inside the range, zero point = round(-min / scale).
  const auto a = nn::choose_activation_quantization(-1.0f, 3.0f, false);
  CHECK(a.scale == Approx(4.0 / 255));
  CHECK(a.zero_point == 64);
  const auto b = nn::choose_activation_quantization(2.0f, 5.0f, true);
  CHECK(b.zero_point == 0);
  CHECK(b.qmax == 127);
  CHECK(nn::choose_activation_quantization(0.0f, 0.0f, false).scale == 0.1f);

  NoGradGuard no_grad;
  nn::Linear zero(4, 3);
  Tensor zero_weight = zero.weight();
  zero_weight.fill_(0.0);
  const nn::QuantizedLinear qz(zero);
  CHECK(qz.weight_scales() == std::vector<float>(3, 1.0f));
  CHECK_CLOSE(qz.forward(ones({2, 4})), zero.bias().unsqueeze(0).expand({2, 3}), 1e-6, 1e-6);

  nn::Linear linear(5, 3);
  const nn::QuantizedLinear q(linear);
  CHECK(q.forward(zeros({0, 5})).shape() == Shape{0, 3});
  CHECK(q.forward(zeros({2, 0, 5})).shape() == Shape{2, 0, 3});
  nn::Linear no_inputs(0, 3);
  CHECK_CLOSE(nn::QuantizedLinear(no_inputs).forward(zeros({2, 0})),
              no_inputs.bias().unsqueeze(0).expand({2, 3}), 1e-6, 1e-6);
  Tensor bad = ones({2, 5});
  bad.data_ptr<float>()[3] = NAN;
  CHECK_THROWS_WITH(q.forward(bad), Contains("QuantizedLinear") && Contains("non-finite"));
  CHECK_THROWS_AS(q.forward(ones({2, 4})), ShapeError);
  CHECK_THROWS_AS(q.forward(ones({2, 5}, kFloat64)), DTypeError);
  nn::Linear doubles(3, 2, true, kFloat64);
  CHECK_THROWS_WITH(nn::QuantizedLinear(doubles), Contains("float32") && Contains("float64"));
}

TEST_CASE("quantize_dynamic: a Transformer encoder runs int8 close to float", "[quantized]") {
  REQUIRE_ONEDNN();
  manual_seed(5);
  nn::TransformerLayerOptions o{.d_model = 32,
                                .nhead = 4,
                                .dim_feedforward = 64,
                                .dropout = 0.0,
                                .activation = nn::FFNActivation::GELU,
                                .batch_first = true};
  auto encoder = std::make_shared<nn::TransformerEncoder>(o, 2, true);
  encoder->eval();
  NoGradGuard no_grad;
  const Tensor x = randn({3, 10, 32});
  const Tensor expected = (*encoder)(x);
  // Per layer: self_attn's input projections, self_attn.out_proj, linear1, linear2.
  CHECK(nn::quantize_dynamic(*encoder) == 8);
  CHECK(encoder->layer(0)->self_attn()->out_proj()->quantized() != nullptr);
  CHECK(encoder->layer(0)->self_attn()->quantized_in_proj() != nullptr);
  const nn::QuantizedSize size = nn::quantized_size(*encoder);
  CHECK(size.float_bytes == 2 * 4 * (3 * 32 * 32 + 32 * 32 + 2 * 32 * 64));
  // The int8 weights are exactly a quarter; the scales (one float32 per output channel: 96 + 32
  // + 64 + 32 per layer) are counted apart.
  CHECK(size.int8_bytes * 4 == size.float_bytes);
  CHECK(static_cast<double>(size.float_bytes) / static_cast<double>(size.int8_bytes) >= 3.95);
  CHECK(size.scale_bytes == 4 * 2 * (96 + 32 + 64 + 32));
  CHECK(size.cache_bytes >= size.int8_bytes);
  // The whole model: the rest (biases, LayerNorms) stays float32.
  CHECK(size.model_float_bytes == encoder->num_parameters() * 4);
  CHECK(size.model_quantized_bytes ==
        size.model_float_bytes - size.float_bytes + size.int8_bytes + size.scale_bytes);
  const Tensor got = (*encoder)(x);
  // LayerNorm-scaled outputs (|y| ~ 1); seen here: max 0.013, mean 0.0028.
  const double max_diff = max(abs(got - expected)).item<float>();
  const double mean_diff = mean(abs(got - expected)).item<float>();
  CAPTURE(max_diff, mean_diff);
  CHECK(max_diff < 0.05);
  CHECK(mean_diff < 0.01);
  CHECK(max_diff > 0.0);  // it did run through int8

  // state_dict is the float model: a fresh model loaded from it and quantised gives the same bits.
  auto copy = std::make_shared<nn::TransformerEncoder>(o, 2, true);
  copy->load_state_dict(encoder->state_dict());
  copy->eval();
  CHECK(nn::quantize_dynamic(*copy) == 8);
  CHECK(test::bit_equal((*copy)(x), got));

  // Undone: float again, bit for bit.
  CHECK(nn::dequantize(*encoder) == 8);
  CHECK(test::bit_equal((*encoder)(x), expected));
}

TEST_CASE("quantize_dynamic: MultiheadAttention's input projections within the error bound",
          "[quantized]") {
  REQUIRE_ONEDNN();
  manual_seed(21);
  NoGradGuard no_grad;
  for (bool bias : {true, false}) {
    nn::MultiheadAttention mha(48, 4, 0.0, bias, 0, 0, true);
    mha.eval();
    if (bias) {
      Tensor b = mha.in_proj_bias();
      b.copy_(randn({3 * 48}) * 0.1);
    }
    const Tensor x = randn({2, 9, 48}) * 1.5, mem = randn({2, 5, 48});
    const auto fq = mha(x, x, x, {.need_weights = false}).output;
    const auto fcross = mha(x, mem, mem, {.need_weights = false}).output;
    CHECK(nn::quantize_dynamic(mha) == 2);  // the input projections and out_proj
    const nn::QuantizedInProjection& q = *mha.quantized_in_proj();
    // Self-attention: one call, q | k | v side by side, against the packed float weight.
    const Tensor qkv = q.forward_for(mha, x, 0, 3);
    CHECK(qkv.shape() == Shape{2, 9, 144});
    std::vector<float> scales;
    for (int64_t i = 0; i < 3; ++i) {
      CHECK(q.block(i).out_features() == 48);
      const auto& s = q.block(i).weight_scales();
      scales.insert(scales.end(), s.begin(), s.end());
    }
    check_bound(mha.in_proj_weight(), mha.in_proj_bias(), x, qkv, scales,
                q.block(0).reduce_range());
    // A block alone gives the same bits as its columns of the joint call (one input
    // quantisation per call, the same for both).
    CHECK(test::bit_equal(q.forward_for(mha, x, 1, 1), qkv.narrow(2, 48, 48)));
    CHECK(test::bit_equal(q.forward_for(mha, x, 1, 2), qkv.narrow(2, 48, 96)));
    // The module's outputs (the attention itself stays float32) stay close to float.
    const Tensor gq = mha(x, x, x, {.need_weights = false}).output;
    const Tensor gcross = mha(x, mem, mem, {.need_weights = false}).output;
    const double self_diff = max(abs(gq - fq)).item<float>();
    const double cross_diff = max(abs(gcross - fcross)).item<float>();
    CAPTURE(bias, self_diff, cross_diff);
    CHECK(self_diff > 0.0);
    CHECK(self_diff < 0.05 * max(abs(fq)).item<float>());
    CHECK(cross_diff > 0.0);
    CHECK(cross_diff < 0.05 * max(abs(fcross)).item<float>());
    // Inference only; pruned heads make the int8 copy stale.
    mha.train();
    CHECK_THROWS_WITH(mha(x, x, x), Contains("inference only") && Contains("eval()"));
    mha.eval();
    mha.prune_heads({1});
    CHECK_THROWS_WITH(mha(x, x, x), Contains("stale") && Contains("quantize_dynamic"));
    CHECK(nn::quantize_dynamic(mha) == 2);
    CHECK(mha(x, x, x).output.shape() == Shape{2, 9, 48});
    CHECK(nn::dequantize(mha) == 2);
    CHECK(mha.quantized_in_proj() == nullptr);
  }
  // kdim / vdim != embed_dim: the separate q, k and v weights.
  nn::MultiheadAttention cross(32, 2, 0.0, true, 24, 40, true);
  cross.eval();
  const Tensor q = randn({3, 4, 32}), k = randn({3, 6, 24}), v = randn({3, 6, 40});
  const Tensor expected = cross(q, k, v).output;
  CHECK(nn::quantize_dynamic(cross) == 2);
  const nn::QuantizedInProjection& qp = *cross.quantized_in_proj();
  CHECK(qp.block(1).in_features() == 24);
  CHECK(qp.block(2).in_features() == 40);
  check_bound(cross.v_proj_weight(), cross.in_proj_bias().narrow(0, 64, 32), v,
              qp.forward_for(cross, v, 2, 1), qp.block(2).weight_scales(),
              qp.block(2).reduce_range());
  const double diff = max(abs(cross(q, k, v).output - expected)).item<float>();
  CHECK(diff > 0.0);
  CHECK(diff < 0.05 * max(abs(expected)).item<float>());
}

TEST_CASE("quantize_dynamic: inference only, stale weights and float64 layers", "[quantized]") {
  REQUIRE_ONEDNN();
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(4, 8));
  model->push_back(std::make_shared<nn::Linear>(8, 2, true, kFloat64));
  CHECK(nn::quantize_dynamic(*model) == 1);  // the float64 Linear stays float
  auto first = model->at<nn::Linear>(0);
  const Tensor x = randn({3, 4});
  {
    NoGradGuard no_grad;
    CHECK_THROWS_WITH((*first)(x), Contains("training mode") && Contains("eval()"));
  }
  model->eval();
  CHECK_THROWS_WITH((*first)(x.detach().requires_grad_()),
                    Contains("inference only") && Contains("requires grad"));
  CHECK_NOTHROW((*first)(x));  // grad mode on, but nothing asks for a gradient
  CHECK((*first)(x).shape() == Shape{3, 8});
  CHECK((*first).forward_activation(x, LinearActivation::ReLU).shape() == Shape{3, 8});
  CHECK(min((*first).forward_activation(x, LinearActivation::ReLU)).item<float>() >= 0.0f);
  // A weight changed in place (load_state_dict) leaves the int8 copy stale: an error, not old
  // results.
  model->load_state_dict(model->state_dict());
  CHECK_THROWS_WITH((*first)(x), Contains("stale") && Contains("quantize_dynamic"));
  CHECK(nn::quantize_dynamic(*model) == 1);
  CHECK_NOTHROW((*first)(x));
  // Converted to float64 after quantising: stale until quantize_dynamic, which then leaves it
  // float.
  model->to(kFloat64);
  CHECK_THROWS_WITH((*first)(x.to(kFloat64)), Contains("stale"));
  CHECK(nn::quantize_dynamic(*model) == 0);
  CHECK(first->quantized() == nullptr);
  CHECK_NOTHROW((*first)(x.to(kFloat64)));
  // A bare Linear is quantised too.
  nn::Linear bare(3, 3);
  CHECK(nn::quantize_dynamic(bare) == 1);
  CHECK(bare.quantized() != nullptr);
}

TEST_CASE("activation quantisation: every SIMD row gives the scalar formula's bits",
          "[quantized]") {
  // The formula (nn/quantized.h), one element at a time.
  auto reference = [](const std::vector<float>& x, const nn::ActivationQuantization& q) {
    std::vector<uint8_t> out(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      out[i] = static_cast<uint8_t>(
          std::clamp(std::nearbyint(x[i] * (1.0f / q.scale)) + static_cast<float>(q.zero_point),
                     0.0f, static_cast<float>(q.qmax)));
    return out;
  };
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> half(-300, 300);
  // 300001 elements run split over the threads.
  for (int64_t n : {0, 1, 7, 15, 16, 17, 31, 32, 33, 100, 1000, 300001}) {
    std::vector<float> x(n);
    // Normal values, and every third one a tie: (h + 0.5) / 2, which x * 2 puts exactly on .5.
    for (int64_t i = 0; i < n; ++i)
      x[i] = i % 3 ? normal(gen) : (static_cast<float>(half(gen)) + 0.5f) / 2.0f;
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
    // scale 0.5 (ties, values clamped at both ends), and the range's own quantisation.
    const std::vector<nn::ActivationQuantization> qs = {
        {.scale = 0.5f, .zero_point = 7, .qmax = 255},
        {.scale = 0.5f, .zero_point = 100, .qmax = 127},
        nn::choose_activation_quantization(lo, hi, false)};
    for (machine::Isa isa : {machine::Isa::Generic, machine::Isa::Avx2, machine::Isa::Avx512}) {
      machine::ProfileGuard guard(isa);  // a row this CPU lacks runs the best one it has
      CAPTURE(n, machine::isa_name(isa), machine::isa_name(machine::profile().simd));
      const auto [got_lo, got_hi] = nn::activation_range(x.data(), n);
      CHECK(got_lo == lo);
      CHECK(got_hi == hi);
      for (const auto& q : qs) {
        CAPTURE(q.scale, q.zero_point, q.qmax);
        std::vector<uint8_t> out(n, 1);
        nn::quantize_activations(x.data(), n, q, out.data());
        CHECK(out == reference(x, q));
      }
      if (n == 0) continue;
      // A NaN anywhere (in a vector body or the scalar tail) makes the range NaN; an Inf shows.
      for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
        std::vector<float> bad = x;
        bad[at] = NAN;
        const auto [nan_lo, nan_hi] = nn::activation_range(bad.data(), n);
        CHECK((std::isnan(nan_lo) && std::isnan(nan_hi)));
        bad[at] = INFINITY;
        CHECK(nn::activation_range(bad.data(), n).second == INFINITY);
      }
    }
  }
}

TEST_CASE("QuantizedLinear: the same bits on 1 and 2 threads and in deterministic mode",
          "[quantized]") {
  REQUIRE_ONEDNN();
  const int threads = num_threads();
  const bool adaptive = adaptive_threads(), det = deterministic();
  set_adaptive_threads(false);
  manual_seed(13);
  nn::Linear linear(192, 320);
  const nn::QuantizedLinear q(linear);
  NoGradGuard no_grad;
  const Tensor x = randn({3, 200, 192});
  set_num_threads(1);
  const Tensor one = q.forward(x, LinearActivation::GELU);
  set_num_threads(2);
  const Tensor two = q.forward(x, LinearActivation::GELU);
  set_deterministic(true);
  const Tensor det_two = q.forward(x, LinearActivation::GELU);
  set_num_threads(threads);
  set_adaptive_threads(adaptive);
  set_deterministic(det);
  CHECK(test::bit_equal(one, two));
  CHECK(test::bit_equal(one, det_two));
  check_within_bound(linear, q, x);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
#undef REQUIRE_ONEDNN
