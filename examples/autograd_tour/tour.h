// The two parts of the autograd tour (main.cpp runs them in order).
#pragma once
#include <cstdint>
#include <string>

namespace nabla::tour {

// Part 1: the worked example softmax(Q K^T / sqrt(2)) V of docs/autograd.md section 8.
struct WorkedExampleResult {
  double loss = 0;
  size_t graph_nodes = 0;
  size_t gradients_checked = 0;  // traced gradients compared with finite differences
  double max_abs_error = 0;      // the largest difference over all of them
};
WorkedExampleResult worked_example(const std::string& out_dir);

// Part 2: one TransformerEncoderLayer inside a small classifier.
struct EncoderSettings {
  int64_t d_model = 32, heads = 4, seq_len = 8, batch = 2, classes = 3;
  int collapse_depth = 2;  // module depth drawn as one box in encoder_graph.*
  int warmup_steps = 3;    // steps before the profiled one (caches warm)
  uint64_t seed = 0;
};
struct EncoderResult {
  size_t graph_nodes = 0, boxes = 0;  // all nodes; boxes at collapse_depth
  int64_t flops = 0;                  // of the profiled training step
  double gemm_fraction = 0;
  int64_t peak_live_bytes = 0;      // during the recorded training step
  bool detached_explained = false;  // the report blamed detach() for `temperature`
};
EncoderResult encoder_layer(const std::string& out_dir, const EncoderSettings& settings);

}  // namespace nabla::tour
