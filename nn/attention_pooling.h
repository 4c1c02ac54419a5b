// Nadaraya-Watson attention pooling (Nadaraya 1964, Watson 1964; d2l 10.2): the prediction at a
// query x is an average of the training targets y_i weighted by a Gaussian kernel on the distance
// to the training inputs x_i (the keys):
//   NadarayaWatson        f(x) = sum_i softmax_i(-(x - x_i)^2 / 2) y_i            (no parameters)
//   NWKernelRegression    f(x) = sum_i softmax_i(-((x - x_i) w)^2 / 2) y_i        (learnable w)
// Shapes: queries (Q,); keys and values (K,) shared by every query, or (Q, K) one row per query
// (d2l trains with the (Q, K) form, each row leaving out the query's own sample) -> (Q,).
#pragma once
#include "nabla/core/generator.h"
#include "nabla/nn/module.h"

namespace nabla::nn {

class NadarayaWatson : public Module {
 public:
  NadarayaWatson() : Module("NadarayaWatson") {}
  Tensor forward(const Tensor& queries, const Tensor& keys, const Tensor& values);
  Tensor operator()(const Tensor& queries, const Tensor& keys, const Tensor& values) {
    return call(&NadarayaWatson::forward, queries, keys, values);
  }
  // (Q, K) weights of the last forward, detached.
  const Tensor& attention_weights() const { return weights_; }

 private:
  Tensor weights_;
};

class NWKernelRegression : public Module {
 public:
  // w (1,) ~ U(0, 1), as d2l's torch.rand((1,)).
  explicit NWKernelRegression(DType dtype = kFloat32, Generator& gen = default_generator());
  Tensor forward(const Tensor& queries, const Tensor& keys, const Tensor& values);
  Tensor operator()(const Tensor& queries, const Tensor& keys, const Tensor& values) {
    return call(&NWKernelRegression::forward, queries, keys, values);
  }
  const Tensor& w() const { return w_; }
  const Tensor& attention_weights() const { return weights_; }

 private:
  Tensor w_, weights_;
};

// The kernel both modules share: weights = softmax(-(scale * (x - x_i))^2 / 2) over the keys and
// the pooled values; scale undefined means 1. `who` names the caller in errors.
struct PooledAttention {
  Tensor output;   // (Q,)
  Tensor weights;  // (Q, K)
};
PooledAttention gaussian_kernel_pool(const Tensor& queries, const Tensor& keys,
                                     const Tensor& values, const Tensor& scale, const char* who);

}  // namespace nabla::nn
