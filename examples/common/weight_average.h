// A running average of a model's parameters, evaluated in place of the trained weights: an
// exponential moving average updated after every optimizer step (Polyak and Juditsky 1992;
// the "EMA of the weights" of many recent trainers), with the warm start of TensorFlow's
// tf.train.ExponentialMovingAverage(num_updates): decay min(decay, (1 + n) / (10 + n)), so the
// first updates are not dominated by the initial weights.
//
// It is a Module whose persistent buffers are the averages and the update count, so a
// Checkpointer saves and restores it with the run (--resume continues the same average).
#pragma once
#include <cstdint>
#include <vector>

#include "nabla/nn/module.h"

namespace nabla::examples {

class WeightAverage : public nn::Module {
 public:
  // Averages of `model`'s float32 parameters, initialised to their current values.
  WeightAverage(const nn::Module& model, double decay);

  // One step: average <- d * average + (1 - d) * parameter, d the warm-started decay.
  void update();
  int64_t updates() const;
  double decay() const { return decay_; }

  // Swaps the model's parameters with the averages (call again to swap back): evaluation of the
  // averaged weights without a second model.
  void swap();

 private:
  std::vector<Tensor> params_, averages_;
  Tensor updates_;  // int64 (1,), a buffer so that the checkpoint keeps it
  double decay_;
};

}  // namespace nabla::examples
