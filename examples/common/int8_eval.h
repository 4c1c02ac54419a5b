// --int8 of the trainers: the trained model evaluated in float32, then with its Linear layers and
// attention input projections quantised to int8 (nn::quantize_dynamic, oneDNN), side by side:
// accuracy, weight bytes and evaluation time. Without oneDNN it says so and the run stays float32.
#pragma once
#include <fmt/format.h>

#include <chrono>
#include <string>

#include "nabla/nn/quantized.h"
#include "nabla/ops/kernels/onednn.h"

namespace nabla::examples {

// Runs accuracy() (an evaluation of `model` that returns its accuracy) in float32 and in int8,
// prints both, and returns the fields for the RESULT line (" int8_accuracy=... ..."), or "" when
// oneDNN is missing. The model is float32 again afterwards.
template <class Accuracy>
std::string compare_int8(nn::Module& model, Accuracy&& accuracy) {
  if (!onednn::available()) {
    fmt::print("--int8: {}; install libdnnl-dev and rebuild for int8 inference. Float32 only.\n",
               onednn::describe());
    return "";
  }
  auto timed = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    const double acc = accuracy();
    return std::pair{acc,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  };
  const auto [float_acc, float_s] = timed();
  const int64_t count = nn::quantize_dynamic(model);
  const nn::QuantizedSize size = nn::quantized_size(model);
  const auto [int8_acc, int8_s] = timed();
  nn::dequantize(model);
  fmt::print(
      "int8 ({} Linear and attention-projection layers, {}): accuracy {:.4f} vs float32 {:.4f} "
      "({:+.2f} points); their weights {:.1f} KiB int8 + {:.1f} KiB scales vs {:.1f} KiB; "
      "evaluation {:.2f} s vs {:.2f} s\n",
      count, onednn::describe(), int8_acc, float_acc, 100 * (int8_acc - float_acc),
      static_cast<double>(size.int8_bytes) / 1024, static_cast<double>(size.scale_bytes) / 1024,
      static_cast<double>(size.float_bytes) / 1024, int8_s, float_s);
  return fmt::format(
      " int8_accuracy={:.4f} int8_eval_s={:.2f} float_eval_s={:.2f} "
      "int8_weight_bytes={} int8_scale_bytes={} float_weight_bytes={}",
      int8_acc, int8_s, float_s, size.int8_bytes, size.scale_bytes, size.float_bytes);
}

}  // namespace nabla::examples
