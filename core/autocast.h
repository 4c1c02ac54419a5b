// Autocast: a thread-local scope in which the matrix products (matmul, linear, linear_activation,
// scaled_dot_product_attention's Q K^T and P V, conv2d) take bfloat16 operands with float32
// accumulation and a float32 result, while every other op keeps its inputs' dtype. This is
// PyTorch's CPU autocast policy for the ops nabla has (torch.autocast("cpu", dtype=bfloat16):
// "CPU Ops that can autocast to bfloat16" are the GEMM family; layer_norm, softmax, log_softmax
// and the losses are on its float32 list). Master weights stay float32; float64 operands are left
// alone, as PyTorch's autocast leaves them. The ops that follow the policy are in ops/autocast.h.
//
//   { autocast::Scope bf16;            // on for this thread until the end of the block
//     Tensor loss = cross_entropy(model(x), y); }
//   loss.backward();                   // outside: backward formulas are not autocast
//
// Scopes nest; Scope(false) turns autocast off inside an enclosing one. The state is per thread,
// as PyTorch's (a worker thread starts with autocast off).
#pragma once

namespace nabla::autocast {

// True inside an enabled Scope on this thread.
bool enabled();

class Scope {
 public:
  explicit Scope(bool enable = true);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool prev_;
};

// True when the CPU has native bf16 dot products (AVX512_BF16 or AMX-BF16), so oneDNN's bf16
// matmul runs at bf16 speed; without them it would only emulate them.
bool cpu_has_native_bf16();

}  // namespace nabla::autocast
