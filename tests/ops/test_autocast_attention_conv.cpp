// Autocast through scaled_dot_product_attention and the convolutions (ops/autocast.h,
// ops/conv.h): the policy (which node records), forward and backward against float64 within the
// bf16 tolerance, and the bytes the nodes keep for backward (counted with saved-tensor hooks).
//
// Tolerances. u = 2^-8 is bfloat16's unit roundoff.
// - conv: a product of bf16-rounded operands summed in float32, so element by element
//   |y - y_exact| <= (2u + u^2 + 2k 2^-24) (|W| * |X|) with k terms (Higham, "Accuracy and
//   Stability of Numerical Algorithms", 2nd ed., eq. 3.5), the same bound test_autocast.cpp
//   asserts for matmul; the gradients likewise with grad rounded too.
// - attention against float64 on the bf16-rounded q, k, v, element by element: on the oneDNN path
//   the weights P are rounded to bf16 for P V (u each), so |O - O_exact| <= (u + 2^-16 +
//   S 2^-24) (P |V|), 2^-16 covering the float32 scores and softmax; on the widening path the
//   same without u, and 1e-5 norm-wise (measured <= 1.5e-7). The backward reads O rounded to
//   bf16 in D = rowsum(dO * O): D is off by u of its scale, and dS = P (dP - D) keeps that where
//   dP - D cancels; 4u norm-wise (measured worst 1.2u, with dropout's 1 / (1 - p)).
// - attention against float32 on the unrounded inputs: q, k and v each rounded (u), the scores
//   then off by up to 2u scale sum |q||k| and the softmax with them; 8u = 2^-5 norm-wise for
//   unit-variance inputs (measured worst 1.3u).
#include "nabla/core/machine.h"
#include "nabla/core/saved_tensor_hooks.h"
#include "nabla/ops/autocast.h"
#include "nabla/ops/kernels/onednn.h"
#include "tests/helpers.h"
#include "tests/ops/autocast_helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using namespace nabla::test;

namespace {

Tensor rounded(const Tensor& t) { return t.detach().to(kBFloat16).to(kFloat32); }

// Largest |actual - exact| / (bound(k) * magnitude) over the elements: <= 1 is within the bound.
double of_bound(const Tensor& actual, const Tensor& exact, const Tensor& magnitude, int64_t k) {
  REQUIRE(actual.shape() == exact.shape());
  const auto a = actual.to(kFloat64).contiguous().to_vector<double>();
  const auto e = exact.to(kFloat64).contiguous().to_vector<double>();
  const auto m = magnitude.to(kFloat64).contiguous().to_vector<double>();
  const double bound = 2 * kU + kU * kU + 2.0 * static_cast<double>(k) * 0x1p-24;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - e[i]) / (bound * std::max(m[i], 1e-30)));
  return worst;
}

// Bytes of every tensor saved for backward while installed (each saved tensor counted once per
// save; the tensor is then saved as usual).
struct SavedBytes final : SavedTensorHooks {
  int64_t bytes = 0;
  std::shared_ptr<PackedTensor> pack(const Node&, const Tensor& t, bool) override {
    bytes += t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
    return nullptr;
  }
};

// Output and gradients of f(q, k, v) with the upstream gradient w (outside any scope).
struct Run {
  Tensor out;
  std::vector<Tensor> grads;
};
template <class F>
Run run_with_grads(F&& f, std::vector<Tensor> inputs, bool autocast_on, uint64_t w_seed) {
  for (Tensor& t : inputs) t = t.detach().requires_grad_();
  Tensor out;
  {
    autocast::Scope scope(autocast_on);
    out = f(inputs);
  }
  const Tensor w = randn_f32(out.shape(), w_seed).to(out.dtype());
  Run r{out.detach(), autograd::grad({out}, inputs, {w}, false, false, /*allow_unused=*/true)};
  return r;
}

struct AttentionCase {
  std::string name;
  Shape q, k, v;
  int mask = 0;  // 0 none, 1 bool, 2 additive float32, 3 additive bfloat16
  bool causal = false;
  double dropout = 0;
  bool transposed_heads = false;  // q, k, v as (B, H, L, d) views of (B, L, H, d) memory
};

Tensor attention(const std::vector<Tensor>& t, const AttentionCase& c, DType dt) {
  auto heads = [&](const Tensor& x) { return c.transposed_heads ? x.transpose(1, 2) : x; };
  const Tensor q = heads(t[0]), k = heads(t[1]), v = heads(t[2]);
  SdpaOptions o;
  const int64_t L = q.size(-2), S = k.size(-2);
  if (c.mask == 1) o.attn_mask = gt(randn_f32({L, S}, 90), -0.5);
  if (c.mask == 2) o.attn_mask = mul(randn_f32({L, S}, 91), 0.5).to(dt);
  // A bfloat16 additive mask is taken under autocast; the references get its values in dt.
  if (c.mask == 3)
    o.attn_mask =
        mul(randn_f32({L, S}, 91), 0.5).to(kBFloat16).to(autocast::enabled() ? kBFloat16 : dt);
  o.is_causal = c.causal;
  o.dropout_p = c.dropout;
  Generator gen(7);  // every run draws the same dropout masks
  o.generator = &gen;
  return scaled_dot_product_attention(q, k, v, o);
}

std::vector<AttentionCase> attention_cases() {
  return {
      {"plain", {2, 3, 6, 8}, {2, 3, 7, 8}, {2, 3, 7, 8}},
      {"bool mask", {2, 3, 6, 8}, {2, 3, 7, 8}, {2, 3, 7, 5}, 1},
      {"additive float32 mask", {2, 2, 5, 8}, {2, 2, 5, 8}, {2, 2, 5, 8}, 2},
      {"additive bfloat16 mask", {2, 2, 5, 8}, {2, 2, 5, 8}, {2, 2, 5, 8}, 3},
      {"causal", {1, 2, 9, 16}, {1, 2, 9, 16}, {1, 2, 9, 16}, 0, true},
      {"causal + dropout 0.2", {2, 2, 8, 8}, {2, 2, 8, 8}, {2, 2, 8, 8}, 0, true, 0.2},
      {"heads split off a projection (non-contiguous; shapes are (B, L, H, d))",
       {2, 6, 3, 8},
       {2, 7, 3, 8},
       {2, 7, 3, 8},
       1,
       false,
       0.1,
       true},
      {"one query, 3-D", {4, 1, 8}, {4, 300, 8}, {4, 300, 8}},  // past one key tile
  };
}

}  // namespace

TEST_CASE("autocast: the policy covers attention and the convolutions", "[autocast]") {
  const Tensor q = randn_f32({1, 2, 4, 8}, 1), x = randn_f32({2, 3, 6, 6}, 2);
  const Tensor w = randn_f32({4, 3, 3, 3}, 3), w1 = randn_f32({4, 3, 3}, 4);
  auto node_name = [](const Tensor& t) { return std::string(t.grad_fn()->name()); };
  const Tensor qg = q.detach().requires_grad_(), xg = x.detach().requires_grad_();
  CHECK(node_name(scaled_dot_product_attention(qg, qg, qg)) == "ScaledDotProductAttentionBackward");
  CHECK(node_name(conv2d(xg, w)) == "Conv2dBackward");
  autocast::Scope bf16;
  const Tensor a = scaled_dot_product_attention(qg, qg, qg), y = conv2d(xg, w);
  CHECK(node_name(a) == "AutocastAttentionBackward");
  CHECK(node_name(y) == "AutocastConv2dBackward");
  const Tensor y1 = conv1d(xg.select(3, 0), w1);  // the node's output, squeezed to (B, O, L)
  CHECK(std::string(y1.grad_fn()->next[0].fn->name()) == "AutocastConv1dBackward");
  CHECK(a.dtype() == kFloat32);
  CHECK(y.dtype() == kFloat32);
  // float64 is left alone, and mixed float32 / bfloat16 operands are taken.
  const Tensor x64 = xg.to(kFloat64);
  CHECK(node_name(conv2d(x64, w.to(kFloat64))) != "AutocastConv2dBackward");
  CHECK(conv2d(x64, w.to(kFloat64)).dtype() == kFloat64);
  CHECK(conv2d(xg.to(kBFloat16), w, randn_f32({4}, 5)).dtype() == kFloat32);
  // Bad input still names the op and the shapes.
  CHECK_THROWS_AS(conv2d(xg, randn_f32({4, 2, 3, 3}, 6)), ShapeError);
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, randn_f32({1, 2, 4, 7}, 7), q),
                    Catch::Matchers::Contains("scaled_dot_product_attention") &&
                        Catch::Matchers::Contains("(1, 2, 4, 7)"));
  CHECK_THROWS_AS(scaled_dot_product_attention(q, q, q, {.attn_mask = randn_f32({3, 3}, 8)}),
                  ShapeError);
}

TEST_CASE("autocast: small attention heads run the fused float32 kernel, large ones oneDNN",
          "[autocast]") {
  using autocast::AttentionKernel;
  autocast::set_path_for_testing(std::nullopt);  // the automatic choice, not a forced path
  const bool onednn = autocast::path() == autocast::Path::OneDnn;
  const AttentionKernel large_kernel =
      onednn ? AttentionKernel::OneDnnBf16 : AttentionKernel::FusedFloat32;
  INFO((onednn ? "oneDNN with native bf16" : "widening path (no oneDNN or no native bf16)"));
  // Which kernel one forward over 2 heads of L queries, S keys and head dim E ran.
  auto ran = [](int64_t L, int64_t S, int64_t E) {
    const Tensor q = randn_f32({2, L, E}, 1), k = randn_f32({2, S, E}, 2);
    const int64_t fused = autocast::attention_kernel_runs(AttentionKernel::FusedFloat32);
    const int64_t bf16 = autocast::attention_kernel_runs(AttentionKernel::OneDnnBf16);
    {
      autocast::Scope scope;
      (void)scaled_dot_product_attention(q, k, k);
    }
    const int64_t d_fused = autocast::attention_kernel_runs(AttentionKernel::FusedFloat32) - fused;
    const int64_t d_bf16 = autocast::attention_kernel_runs(AttentionKernel::OneDnnBf16) - bf16;
    REQUIRE(d_fused + d_bf16 == 1);
    return d_bf16 == 1 ? AttentionKernel::OneDnnBf16 : AttentionKernel::FusedFloat32;
  };
  // vit_small's heads (50 tokens x head dim 16: 40000 multiply-adds) stay float32.
  CHECK(autocast::attention_kernel(50, 50, 16) == AttentionKernel::FusedFloat32);
  CHECK(ran(50, 50, 16) == AttentionKernel::FusedFloat32);
  CHECK(ran(64, 64, 31) == AttentionKernel::FusedFloat32);  // one below the threshold
  // From 64 x 64 x 32 the products go to oneDNN, whichever dim makes the size.
  CHECK(autocast::attention_kernel(64, 64, 32) == large_kernel);
  CHECK(ran(64, 64, 32) == large_kernel);
  CHECK(ran(16, 256, 64) == large_kernel);
  // The threshold is the machine profile's, and runtime_info reports it.
  CHECK_THAT(runtime_info(), Catch::Matchers::Contains(
                                 "autocast attention on oneDNN from 131072 multiply-adds a head"));
  {
    machine::Profile all_onednn = machine::profile();
    all_onednn.autocast_attention_onednn_min_macs = 0;
    machine::ProfileGuard guard(all_onednn);
    CHECK(ran(50, 50, 16) == large_kernel);
  }
  // A forced path is taken as given, however small the head.
  autocast::set_path_for_testing(autocast::Path::Widening);
  CHECK(ran(64, 64, 32) == AttentionKernel::FusedFloat32);
  if (onednn) {
    autocast::set_path_for_testing(autocast::Path::OneDnn);
    CHECK(ran(4, 4, 8) == AttentionKernel::OneDnnBf16);
  }
  autocast::set_path_for_testing(std::nullopt);
  CHECK(std::string(autocast::attention_kernel_name(AttentionKernel::OneDnnBf16)) == "oneDNN bf16");
}

TEST_CASE("autocast: attention forward and backward within the bf16 tolerance", "[autocast]") {
  std::vector<autocast::Path> paths = {autocast::Path::Widening};
  if (autocast::path() == autocast::Path::OneDnn) paths.push_back(autocast::Path::OneDnn);
  for (const autocast::Path path : paths) {
    const bool native = path == autocast::Path::OneDnn;
    INFO((native ? "oneDNN path" : "widening path"));
    autocast::set_path_for_testing(path);
    uint64_t seed = 200;
    for (const AttentionCase& c : attention_cases()) {
      INFO(c.name);
      const std::vector<Tensor> in = {randn_f32(c.q, seed), randn_f32(c.k, seed + 1),
                                      randn_f32(c.v, seed + 2)};
      seed += 3;
      auto f32 = [&](const std::vector<Tensor>& t) { return attention(t, c, kFloat32); };
      auto f64 = [&](const std::vector<Tensor>& t) { return attention(t, c, kFloat64); };
      const Run bf = run_with_grads(f32, in, true, seed);
      if (native) CHECK(onednn::last_bf16_implementation() != "ref:any");
      const Run fp = run_with_grads(f32, in, false, seed);
      std::vector<Tensor> in_rounded64;
      for (const Tensor& t : in) in_rounded64.push_back(rounded(t).to(kFloat64));
      const Run exact = run_with_grads(f64, in_rounded64, false, seed);
      // The weights' magnitudes times |V|: P |V| (with the same mask and dropout).
      const Tensor mag = f64({in_rounded64[0], in_rounded64[1], abs(in_rounded64[2])});
      REQUIRE(bf.out.dtype() == kFloat32);
      const double keys = static_cast<double>(c.k[c.k.size() - 2]);
      const double bound = (native ? kU : 0) + 0x1p-16 + keys * 0x1p-24;
      CHECK(max(sub(abs(sub(bf.out.to(kFloat64), exact.out)), mul(mag, bound))).item() <= 0);
      if (!native) CHECK(norm_ratio(bf.out, exact.out) <= 1e-5);
      CHECK(norm_ratio(bf.out, fp.out) <= 8 * kU);
      CHECK(norm_ratio(bf.out, fp.out) > 0);  // it did take rounded values
      for (size_t i = 0; i < 3; ++i) {
        INFO("gradient " << i);
        REQUIRE(bf.grads[i].dtype() == kFloat32);
        CHECK(norm_ratio(bf.grads[i], exact.grads[i]) <= 4 * kU);
        CHECK(norm_ratio(bf.grads[i], fp.grads[i]) <= 8 * kU);
      }
    }
  }
  autocast::set_path_for_testing(std::nullopt);
}

TEST_CASE("autocast: attention with bfloat16 inputs returns bfloat16 gradients", "[autocast]") {
  const Tensor q = randn_f32({2, 5, 8}, 300).to(kBFloat16).requires_grad_();
  Tensor out;
  {
    autocast::Scope bf16;
    out = scaled_dot_product_attention(q, q, q, {.is_causal = true});
  }
  CHECK(out.dtype() == kFloat32);
  sum(out).backward();
  CHECK(q.grad().dtype() == kBFloat16);
  // Size 0 runs through and gives empty gradients.
  const Tensor e = randn_f32({2, 0, 8}, 301).requires_grad_();
  {
    autocast::Scope bf16;
    out = scaled_dot_product_attention(e, e, e);
  }
  sum(out).backward();
  CHECK(e.grad().shape() == Shape{2, 0, 8});
  // create_graph through the autocast node says so.
  const Tensor p = randn_f32({1, 3, 4}, 302).requires_grad_();
  Tensor s;
  {
    autocast::Scope bf16;
    s = sum(scaled_dot_product_attention(p, p, p));
  }
  CHECK_THROWS_AS(autograd::grad({s}, {p}, {}, false, /*create_graph=*/true), AutogradError);
}

TEST_CASE("autocast: attention keeps half the bytes for backward", "[autocast]") {
  // (B, H, L, d) = (2, 4, 32, 16): q, k, v and O of 4096 elements each, lse 256.
  const Tensor q = randn_f32({2, 4, 32, 16}, 400).requires_grad_();
  const Tensor k = randn_f32({2, 4, 32, 16}, 401), v = randn_f32({2, 4, 32, 16}, 402);
  auto saved_bytes = [&](bool on) {
    SavedBytes hooks;
    SavedTensorHooksGuard guard(&hooks);
    autocast::Scope scope(on);
    const Tensor out = scaled_dot_product_attention(q, k, v, {.is_causal = true});
    return hooks.bytes;
  };
  const int64_t f32 = saved_bytes(false), bf16 = saved_bytes(true);
  CHECK(f32 == 4 * (4 * 4096 + 256));
  CHECK(bf16 == 2 * 4 * 4096 + 4 * 256);  // bf16 q, k, v, O; lse stays float32
  CHECK(static_cast<double>(bf16) / static_cast<double>(f32) < 0.52);
}

namespace {

struct ConvCase {
  std::string name;
  Shape x, w;
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
  bool bias = false, transposed = false, one_d = false;
};

Tensor conv(const std::vector<Tensor>& t, const ConvCase& c) {
  const Tensor x = c.transposed ? t[0].transpose(2, 3) : t[0];
  const Tensor b = c.bias ? t[2] : Tensor();
  if (c.one_d) return conv1d(x, t[1], b, c.stride, c.padding, c.dilation, c.groups);
  return conv2d(x, t[1], b, c.stride, c.padding, c.dilation, c.groups);
}

}  // namespace

TEST_CASE("autocast: conv forward and backward within the bf16 bound", "[autocast]") {
  const std::vector<ConvCase> cases = {
      {"3x3 padding 1, bias", {2, 3, 7, 6}, {5, 3, 3, 3}, 1, 1, 1, 1, true},
      {"stride 2, groups 2, dilation 2", {2, 4, 9, 9}, {6, 2, 3, 3}, 2, 1, 2, 2},
      {"patch embedding (stride = kernel), transposed input",
       {2, 3, 8, 8},
       {8, 3, 4, 4},
       4,
       0,
       1,
       1,
       true,
       true},
      {"depthwise", {1, 4, 5, 5}, {4, 1, 3, 3}, 1, 1, 1, 4},
      {"conv1d, stride 2", {2, 3, 11}, {4, 3, 3}, 2, 1, 1, 1, true, false, true},
      {"empty batch", {0, 3, 5, 5}, {2, 3, 3, 3}, 1, 1},
  };
  uint64_t seed = 500;
  for (const ConvCase& c : cases) {
    INFO(c.name);
    Shape xs = c.x;
    if (c.transposed) std::swap(xs[2], xs[3]);
    const std::vector<Tensor> in = {randn_f32(xs, seed), randn_f32(c.w, seed + 1),
                                    randn_f32({c.w[0]}, seed + 2)};
    seed += 3;
    auto f = [&](const std::vector<Tensor>& t) { return conv(t, c); };
    const Run bf = run_with_grads(f, in, true, seed);
    REQUIRE(bf.out.dtype() == kFloat32);
    // float64 references on the exact inputs, and the magnitudes |W| * |X| and the gradients of
    // sum(|G| * (|W| * |X|)), which bound each gradient's terms.
    std::vector<Tensor> in64, abs64;
    for (const Tensor& t : in) {
      in64.push_back(t.to(kFloat64));
      abs64.push_back(abs(t.to(kFloat64)));
    }
    const Run exact = run_with_grads(f, in64, false, seed);
    const Tensor w64 = randn_f32(bf.out.shape(), seed).to(kFloat64);
    std::vector<Tensor> mag_in = abs64;
    for (Tensor& t : mag_in) t = t.requires_grad_();
    const Tensor mag = conv(mag_in, c);
    const auto mag_grads = autograd::grad({mag}, mag_in, {abs(w64)}, false, false, true);
    const int64_t taps = c.w[1] * c.w[2] * (c.one_d ? 1 : c.w[3]);
    const int64_t out_positions = bf.out.numel() / std::max<int64_t>(c.w[0], 1);
    CHECK(of_bound(bf.out, exact.out, mag.detach(), taps + 1) <= 1.0);
    CHECK(of_bound(bf.grads[0], exact.grads[0], mag_grads[0], c.w[0] * taps) <= 1.0);
    CHECK(of_bound(bf.grads[1], exact.grads[1], mag_grads[1], out_positions) <= 1.0);
    if (bf.out.numel() > 0) CHECK(norm_ratio(bf.out, exact.out) > 1e-6);  // rounded operands
    for (const Tensor& g : bf.grads)
      if (g.defined()) CHECK(g.dtype() == kFloat32);
  }
}

TEST_CASE("autocast: conv keeps bf16 operands; the widening path agrees", "[autocast]") {
  const Tensor x = randn_f32({2, 3, 8, 8}, 600).requires_grad_();
  const Tensor w = randn_f32({4, 3, 3, 3}, 601).requires_grad_();
  SavedBytes hooks;
  Tensor native;
  {
    SavedTensorHooksGuard guard(&hooks);
    autocast::Scope bf16;
    native = conv2d(x, w, Tensor(), 1, 1);
  }
  CHECK(hooks.bytes == 2 * (x.numel() + w.numel()));  // float32 keeps 4 bytes of each
  Tensor wide;
  {
    autocast::Scope bf16;
    autocast::set_path_for_testing(autocast::Path::Widening);
    wide = conv2d(x, w, Tensor(), 1, 1);
    autocast::set_path_for_testing(std::nullopt);
  }
  // The same rounded operands; only the float32 summation order may differ (27 taps).
  const Tensor mag = conv2d(abs(x.detach()), abs(w.detach()), Tensor(), 1, 1);
  CHECK(max(div(abs(sub(wide, native)), mag)).item() <= 2 * 27 * 0x1p-24);
  // create_graph through the autocast convolution says so.
  CHECK_THROWS_AS(autograd::grad({sum(native)}, {x}, {}, false, /*create_graph=*/true),
                  AutogradError);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
