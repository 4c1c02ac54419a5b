// Parameter-free layers: ReLU, Tanh, Sigmoid, Identity, Flatten.
#pragma once
#include <cstdint>

#include "nn/module.h"

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
