// Parameter-free layers: ReLU, Tanh, Sigmoid, Softplus, LeakyReLU, ELU, Mish, Hardtanh,
// LogSigmoid (PyTorch's names and defaults), Identity, Flatten.
#pragma once
#include <cstdint>

#include "nabla/nn/module.h"

namespace nabla::nn {

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&ReLU::forward, x); }
};

class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&Tanh::forward, x); }
};

class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&Sigmoid::forward, x); }
};

class Softplus : public Module {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0)
      : Module("Softplus"), beta_(beta), threshold_(threshold) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&Softplus::forward, x); }

 private:
  double beta_, threshold_;
};

class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01)
      : Module("LeakyReLU"), negative_slope_(negative_slope) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&LeakyReLU::forward, x); }

 private:
  double negative_slope_;
};

class ELU : public Module {
 public:
  explicit ELU(double alpha = 1.0) : Module("ELU"), alpha_(alpha) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&ELU::forward, x); }

 private:
  double alpha_;
};

class Mish : public Module {
 public:
  Mish() : Module("Mish") {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&Mish::forward, x); }
};

class Hardtanh : public Module {
 public:
  explicit Hardtanh(double min_val = -1.0, double max_val = 1.0)
      : Module("Hardtanh"), min_val_(min_val), max_val_(max_val) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&Hardtanh::forward, x); }

 private:
  double min_val_, max_val_;
};

class LogSigmoid : public Module {
 public:
  LogSigmoid() : Module("LogSigmoid") {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&LogSigmoid::forward, x); }
};

class Identity : public Module {
 public:
  Identity() : Module("Identity") {}
  Tensor forward(const Tensor& x) const { return x; }
  Tensor operator()(const Tensor& x) const { return call(&Identity::forward, x); }
};

// Flattens dims start_dim..end_dim into one (a view when possible).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_dim_(start_dim), end_dim_(end_dim) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&Flatten::forward, x); }

 private:
  int64_t start_dim_, end_dim_;
};

}  // namespace nabla::nn
