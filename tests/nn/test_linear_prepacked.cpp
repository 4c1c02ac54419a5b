// Inference linear on a weight packed once (ops/linear_prepacked.h): each path forced through the
// machine profile, oneDNN's against OpenBLAS's within float32 rounding (bias, no bias, ReLU, GELU,
// 3-D and strided inputs, a Transformer encoder); a recorded call, deterministic mode and small
// products keep OpenBLAS; a changed weight packs again; nabla's packing of oneDNN's blocked layout
// (padding included, into nabla's allocator) and the activation in nabla's own pass.
#include "nabla/ops/linear_prepacked.h"

#include <algorithm>
#include <cmath>

#include "nabla/core/allocator.h"
#include "nabla/core/machine.h"
#include "nabla/core/parallel.h"
#include "nabla/ops/kernels/kernels.h"
#include "nabla/ops/kernels/linear.h"
#include "nabla/ops/kernels/onednn.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

// The profile in force with every inference linear on oneDNN (0) or on OpenBLAS (-1).
machine::Profile forced(int64_t min_flop) {
  machine::Profile p = machine::profile();
  p.prepacked_linear_min_flop = min_flop;
  return p;
}

Tensor random(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, g);
}

// The path runs with oneDNN built in and the tuned kernels on (ctest's reference: runs keep
// OpenBLAS, whose results the comparisons then meet exactly).
bool prepacked_runs() { return onednn::available() && kernels::tuned_enabled(); }

// Sums of k products of N(0, 1) values: float32 rounding grows with sqrt(k) |terms|.
constexpr double kAtol = 2e-4, kRtol = 1e-4;

}  // namespace

TEST_CASE("prepacked linear: oneDNN and OpenBLAS agree on every shape and activation") {
  NoGradGuard no_grad;
  for (const bool with_bias : {true, false}) {
    for (const auto& [x_shape, in, out] : {std::tuple{Shape{64, 128}, int64_t{128}, int64_t{384}},
                                           std::tuple{Shape{4, 16, 96}, int64_t{96}, int64_t{40}},
                                           std::tuple{Shape{3, 512}, int64_t{512}, int64_t{128}}}) {
      nn::Linear layer(in, out, with_bias);
      const Tensor x = random(x_shape, 3);
      Tensor expected, got;
      {
        machine::ProfileGuard blas(forced(-1));
        expected = layer(x);
      }
      CHECK(layer.prepacked().packs() == 0);
      {
        machine::ProfileGuard dnnl(forced(0));
        got = layer(x);
      }
      INFO("x " << shape_str(x_shape) << " out " << out << " bias " << with_bias);
      CHECK(got.shape() == expected.shape());
      CHECK_CLOSE(got, expected, kAtol, kRtol);
      CHECK(layer.prepacked().packs() == (prepacked_runs() ? 1 : 0));
      for (const auto act :
           {LinearActivation::ReLU, LinearActivation::GELU, LinearActivation::GELUTanh}) {
        machine::ProfileGuard blas(forced(-1));
        const Tensor want = layer.forward_activation(x, act);
        machine::ProfileGuard dnnl(forced(0));
        CHECK_CLOSE(layer.forward_activation(x, act), want, kAtol, kRtol);
      }
      CHECK(layer.prepacked().packs() == (prepacked_runs() ? 1 : 0));  // one weight, one pack
    }
  }
}

TEST_CASE("prepacked linear: a strided input and a weight view") {
  NoGradGuard no_grad;
  const Tensor x = random({40, 2, 64}, 5).select(1, 1);  // rows 128 floats apart
  const Tensor w = random({96, 64}, 6), b = random({96}, 7);
  const Tensor expected = linear(x, w.narrow(0, 16, 48), b.narrow(0, 16, 48));
  PrepackedLinear packed;
  machine::ProfileGuard dnnl(forced(0));
  const Tensor got = packed.try_forward(x, w.narrow(0, 16, 48), b.narrow(0, 16, 48));
  if (!prepacked_runs()) {
    CHECK_FALSE(got.defined());
    return;
  }
  CHECK_CLOSE(got, expected, kAtol, kRtol);
  CHECK(packed.packed_bytes() >= 48 * 64 * 4);
}

TEST_CASE(
    "prepacked linear: a recorded call, deterministic mode and small products keep OpenBLAS") {
  nn::Linear layer(128, 256);
  const Tensor x = random({32, 128}, 9);
  machine::ProfileGuard dnnl(forced(0));
  // Grad mode on and the weight requires grad: recorded, bitwise the plain linear.
  const Tensor y = layer(x);
  CHECK(y.grad_fn() != nullptr);
  CHECK(test::bit_equal(y, linear(x, layer.weight(), layer.bias())));
  CHECK(layer.prepacked().packs() == 0);
  {
    NoGradGuard no_grad;
    set_deterministic(true);
    const Tensor d = layer(x), want = linear(x, layer.weight(), layer.bias());
    set_deterministic(false);
    CHECK(layer.prepacked().packs() == 0);
    CHECK(test::bit_equal(d, want));
  }
  {
    // Above the profile's threshold only: 2 * 32 * 256 * 128 = 2 MFLOP.
    machine::ProfileGuard high(forced(int64_t{1} << 22));
    NoGradGuard no_grad;
    CHECK(test::bit_equal(layer(x), y.detach()));
    CHECK(layer.prepacked().packs() == 0);
    CHECK_FALSE(prepacked_linear_chosen(32, 256, 128));
    CHECK(prepacked_linear_chosen(64, 256, 128) == onednn::available());
  }
  machine::ProfileGuard never(forced(-1));
  CHECK_FALSE(prepacked_linear_chosen(1 << 12, 1 << 12, 1 << 12));
  CHECK_THAT(runtime_info(), Contains("inference linear"));
}

TEST_CASE("prepacked linear: a changed weight packs again") {
  if (!prepacked_runs()) return;
  nn::Linear layer(64, 80);
  const Tensor x = random({16, 64}, 11);
  machine::ProfileGuard dnnl(forced(0));
  NoGradGuard no_grad;
  const Tensor first = layer(x);
  CHECK(test::bit_equal(layer(x), first));
  CHECK(layer.prepacked().packs() == 1);
  Tensor w = layer.weight();
  w.copy_(random({80, 64}, 12));  // an in-place change: the version moves
  CHECK_CLOSE(layer(x), linear(x, layer.weight(), layer.bias()), kAtol, kRtol);
  CHECK(layer.prepacked().packs() == 2);
  set_data_(w, random({80, 64}, 13));  // new storage, as to() and prune_heads do
  CHECK_CLOSE(layer(x), linear(x, layer.weight(), layer.bias()), kAtol, kRtol);
  CHECK(layer.prepacked().packs() == 3);
}

TEST_CASE("prepacked linear: a Transformer encoder in eval mode agrees with OpenBLAS") {
  manual_seed(4);
  nn::TransformerEncoderLayerOptions o;
  o.d_model = 64, o.nhead = 4, o.dim_feedforward = 128, o.batch_first = true;
  o.activation = nn::FFNActivation::GELU;
  nn::TransformerEncoder encoder(o, 2);
  encoder.eval();
  const Tensor x = random({4, 24, 64}, 15);
  NoGradGuard no_grad;
  Tensor expected;
  {
    machine::ProfileGuard blas(forced(-1));
    expected = encoder(x);
  }
  machine::ProfileGuard dnnl(forced(0));
  CHECK_CLOSE(encoder(x), expected, 1e-4, 1e-4);
  const auto& layer0 = *encoder.layer(0);
  CHECK(layer0.self_attn()->in_proj_prepacked().packs() == (prepacked_runs() ? 1 : 0));
}

TEST_CASE("prepacked linear: nabla packs oneDNN's blocked layout, padding included") {
  if (!onednn::available()) return;
  // Sizes below, at and across the layout's blocks (16 rows of k, up to 64 columns of n).
  for (const auto& [n, k] :
       {std::pair<int64_t, int64_t>{1, 1}, {10, 7}, {40, 96}, {130, 33}, {384, 128}, {64, 700}}) {
    INFO("weight " << n << " x " << k);
    const int64_t m = 37;
    const Tensor w = random({n, k}, 21), x = random({m, k}, 22), b = random({n}, 23);
    const onednn::PackedF32Weights packed(n, k, w.data_ptr<float>());
    const std::vector<float> back = packed.unpack();
    CHECK(std::equal(back.begin(), back.end(), w.data_ptr<float>()));
    CHECK(packed.packed_bytes() >= n * k * 4);
    onednn::F32Linear p;
    p.m = m, p.n = n, p.k = k, p.ldx = k, p.ldc = n;
    Tensor c = empty({m, n}, kFloat32);
    onednn::linear_f32(p, x.data_ptr<float>(), packed, b.data_ptr<float>(), c.data_ptr<float>());
    const Tensor expected = linear(x.to(kFloat64), w.to(kFloat64), b.to(kFloat64));
    CHECK_CLOSE(c.to(kFloat64), expected, kAtol * std::sqrt(static_cast<double>(k)), kRtol);
    CHECK(packed.repacks() == 0);
  }
}

TEST_CASE("prepacked linear: the packed copy lives in nabla's allocator") {
  if (!onednn::available()) return;
  const Tensor w = random({256, 128}, 24);
  const size_t before = allocator::live_bytes();
  {
    const onednn::PackedF32Weights packed(256, 128, w.data_ptr<float>());
    CHECK(allocator::live_bytes() - before ==
          allocator::size_class(static_cast<size_t>(packed.packed_bytes())));
  }
  CHECK(allocator::live_bytes() == before);
}

TEST_CASE("prepacked linear: ReLU and GELU run in linear_activation's pass, not in oneDNN") {
  if (!prepacked_runs()) return;
  NoGradGuard no_grad;
  nn::Linear layer(128, 192);
  const Tensor x = random({2, 40, 128}, 25);
  machine::ProfileGuard dnnl(forced(0));
  const Tensor z = layer(x);  // the packed product alone
  for (const auto act :
       {LinearActivation::ReLU, LinearActivation::GELU, LinearActivation::GELUTanh}) {
    Tensor want = z.clone();
    kernels::linear_activation_forward(want, want, act);
    CHECK(test::bit_equal(layer.forward_activation(x, act), want));
  }
  CHECK(layer.prepacked().packs() == 1);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
