// The ops of the autocast policy (core/autocast.h): inside an autocast::Scope, matmul, linear,
// linear_activation and scaled_dot_product_attention hand float32 (or bfloat16) operands here;
// conv1d/conv2d record their own node around bf16_product_kernel (ops/conv.cpp).
// The products take bfloat16 operands, accumulate in float32 and return float32; their backward
// runs both gradient products the same way and returns each input's gradient in its dtype, so a
// float32 master weight gets a float32 gradient. What they save for backward is the bfloat16
// copies of their operands: half the bytes of the float32 tensors.
//
// Output dtype: float32, as the oneDNN product writes it (PyTorch returns bfloat16 instead). The
// ops between the products (add, dropout, gelu, layer_norm) then run on float32 as they do without
// autocast, nothing is rounded twice, and the memory a step saves comes from the products' saved
// operands (docs/architecture.md, Autocast).
//
// The products run on oneDNN's bf16 matmul when nabla has oneDNN and the CPU has native bf16 dot
// products (AVX512_BF16, AMX); otherwise on float32 GEMMs of the widened bfloat16 values (the same
// numbers up to summation order: a product of two bfloat16 values is exact in float32), and the
// first such product prints once, to stderr, that autocast then gives memory savings only.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>

#include "nabla/core/autocast.h"
#include "nabla/core/tensor.h"
#include "nabla/ops/attention.h"
#include "nabla/ops/linear.h"

namespace nabla::autocast {

enum class Path : uint8_t { OneDnn, Widening };
// The path the products take (decided once; the notice is printed the first time it is Widening).
Path path();
// Tests: force a path (nullopt: back to the detected one). The notice still prints only once.
void set_path_for_testing(std::optional<Path> p);
// How many times the "memory savings only" notice has been printed (0 or 1).
int64_t notices_printed();

// True when autocast is enabled and every defined operand is float32 or bfloat16 (float64 and
// float16 operands are left alone, as PyTorch's autocast leaves float64).
bool applies(std::initializer_list<const Tensor*> operands);

// The autocast versions of the ops (same arguments and errors as theirs; float32 results).
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
Tensor linear_activation(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         LinearActivation act);
// The fused kernel on q, k and v rounded to bfloat16 (widened: float32 compute, float32
// output); the node saves the bf16 q, k, v and O, not float32 copies.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const SdpaOptions& options);

// The kernels autocast attention's forward chooses between: both products on oneDNN's bf16
// matmul (ops/attention_bf16.cpp), or the fused float32 kernel on the widened values.
enum class AttentionKernel : uint8_t { OneDnnBf16, FusedFloat32 };
const char* attention_kernel_name(AttentionKernel k);  // "oneDNN bf16", "fused float32"
// The one it runs for heads of L queries, S keys and head dim E: oneDNN when path() is OneDnn and
// a head has at least the machine profile's autocast_attention_onednn_min_macs multiply-adds
// (L * S * E; core/machine.h); a path forced by set_path_for_testing is taken as given.
AttentionKernel attention_kernel(int64_t L, int64_t S, int64_t E);
// How many autocast attention forwards have run on kernel k in this process (all threads).
int64_t attention_kernel_runs(AttentionKernel k);

// The product without autograd, for ops that record their own node (autocast conv): a16 and b16
// bfloat16 and contiguous, op(a16) op(b16) as bf16_product computes it -> float32 (batch..., M, N).
Tensor bf16_product_kernel(const Tensor& a16, bool ta, const Tensor& b16, bool tb);

// The bf16 product itself: op(a) op(b) with op = transpose when ta / tb, batch dims broadcast
// (a (..., r, c) or its transpose). Differentiable; float32 result.
Tensor bf16_product(const Tensor& a, bool ta, const Tensor& b, bool tb);

}  // namespace nabla::autocast
