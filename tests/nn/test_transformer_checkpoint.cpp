// checkpoint_layers on TransformerEncoder and TransformerDecoder (core/grad_checkpoint.h): with
// dropout on (in the attention weights and the residual branches), the output, every parameter's
// gradient and the inputs' gradients are bitwise those of the unchecked stack, in float32 and
// float64, post-norm and pre-norm, with masks; fewer tensors live between forward and backward
// (every layer but the last is checkpointed);
// eval mode and the cached path are untouched.
#include <cstring>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

using test::bit_equal;

nn::TransformerLayerOptions layer_options(bool norm_first) {
  return {.d_model = 16,
          .nhead = 4,
          .dim_feedforward = 24,
          .dropout = 0.2,
          .activation = nn::FFNActivation::GELU,
          .batch_first = true,
          .norm_first = norm_first};
}

Tensor input(const Shape& shape, DType dt, uint64_t seed) {
  Generator g(seed);
  return randn(shape, g, dt).requires_grad_();
}

// The output, then the gradients of the inputs and of every parameter (in order).
struct Run {
  Tensor out;
  std::vector<Tensor> grads;
};

void check_same_run(const Run& got, const Run& want) {
  CHECK(bit_equal(got.out, want.out));
  REQUIRE(got.grads.size() == want.grads.size());
  for (size_t i = 0; i < got.grads.size(); ++i) {
    INFO("gradient " << i);
    REQUIRE(got.grads[i].defined());
    CHECK(bit_equal(got.grads[i], want.grads[i]));
  }
}

Run encoder_run(bool checkpointed, DType dt, bool norm_first) {
  manual_seed(21);
  nn::TransformerEncoder enc(layer_options(norm_first), 3, /*final_norm=*/true);
  enc.to(dt);
  enc.set_checkpoint_layers(checkpointed);
  Tensor x = input({2, 5, 16}, dt, 1);
  Tensor padding = tensor({{0, 0, 0, 0, 1}, {0, 0, 0, 1, 1}}).to(kBool);
  Tensor out = enc(x, {.src_key_padding_mask = padding, .is_causal = true});
  Generator g(2);
  sum(mul(out, randn(out.shape(), g, dt))).backward();
  Run r{out.detach(), {x.grad()}};
  for (const Tensor& p : enc.parameters()) r.grads.push_back(p.grad());
  return r;
}

Run decoder_run(bool checkpointed, DType dt, bool norm_first) {
  manual_seed(22);
  nn::TransformerDecoder dec(layer_options(norm_first), 3, /*final_norm=*/false);
  dec.to(dt);
  dec.set_checkpoint_layers(checkpointed);
  Tensor tgt = input({2, 4, 16}, dt, 3), memory = input({2, 6, 16}, dt, 4);
  Tensor out = dec(tgt, memory, {.tgt_is_causal = true});
  Generator g(5);
  sum(mul(out, randn(out.shape(), g, dt))).backward();
  Run r{out.detach(), {tgt.grad(), memory.grad()}};
  for (const Tensor& p : dec.parameters()) r.grads.push_back(p.grad());
  return r;
}

}  // namespace

TEST_CASE("TransformerEncoder checkpoint_layers: output and gradients bitwise, dropout on",
          "[nn]") {
  for (DType dt : {kFloat32, kFloat64}) {
    for (bool norm_first : {false, true}) {
      INFO(dtype_name(dt) << (norm_first ? " pre-norm" : " post-norm"));
      const Run want = encoder_run(false, dt, norm_first);
      const Run got = encoder_run(true, dt, norm_first);
      check_same_run(got, want);
      CHECK(default_generator().offset() > 0);
    }
  }
}

TEST_CASE("TransformerDecoder checkpoint_layers: output and gradients bitwise, dropout on",
          "[nn]") {
  for (DType dt : {kFloat32, kFloat64}) {
    for (bool norm_first : {false, true}) {
      INFO(dtype_name(dt) << (norm_first ? " pre-norm" : " post-norm"));
      check_same_run(decoder_run(true, dt, norm_first), decoder_run(false, dt, norm_first));
    }
  }
}

TEST_CASE("TransformerEncoder checkpoint_layers: fewer tensors live between forward and backward",
          "[nn]") {
  constexpr int64_t kLayers = 8;
  nn::TransformerEncoder enc(layer_options(false), kLayers);
  Tensor x = input({2, 8, 16}, kFloat32, 1);
  auto live_after_forward = [&](bool checkpointed) {
    enc.set_checkpoint_layers(checkpointed);
    const int64_t before = live_objects().storages;
    Tensor out = enc(x);
    const int64_t live = live_objects().storages - before;
    sum(out).backward();
    return live;
  };
  const int64_t plain = live_after_forward(false), checked = live_after_forward(true);
  INFO("storages alive after the forward: " << plain << " unchecked, " << checked << " checked");
  // Checkpointed: the outputs of the first layers, and what the last layer (not checkpointed)
  // keeps, which is what any one layer keeps unchecked.
  CHECK(checked <= kLayers + plain / kLayers);
  CHECK(4 * checked <= plain);
}

TEST_CASE("TransformerEncoder checkpoint_layers: eval mode and no-grad are not checkpointed",
          "[nn]") {
  manual_seed(3);
  nn::TransformerEncoder enc(layer_options(false), 2);
  Tensor x = input({2, 5, 16}, kFloat32, 1);
  enc.eval();
  Tensor plain = enc(x);
  enc.set_checkpoint_layers(true);
  Tensor checked = enc(x);
  CHECK(bit_equal(checked, plain));
  sum(checked).backward();  // eval mode: an ordinary graph
  CHECK(x.grad().defined());
  enc.train();
  NoGradGuard no_grad;
  CHECK_FALSE(enc(x).requires_grad());
}

}  // namespace NABLA_UNITY_ID
}  // namespace
