// --bf16 of the trainers: forward passes and losses under bf16 autocast (core/autocast.h: the
// matrix products take bf16 operands through oneDNN, everything else stays float32, master
// weights and optimizer state too). Without oneDNN it says so and the run stays float32.
#pragma once
#include <fmt/format.h>

#include "nabla/ops/autocast.h"
#include "nabla/ops/kernels/onednn.h"

namespace nabla::examples {

// Whether the run uses autocast: `requested` (--bf16) and oneDNN present. Prints which.
inline bool use_bf16(bool requested) {
  if (!requested) return false;
  if (!onednn::available()) {
    fmt::print("--bf16: {}; install libdnnl-dev and rebuild for bf16 autocast. Float32 only.\n",
               onednn::describe());
    return false;
  }
  fmt::print("--bf16: bf16 autocast of the matrix products ({}{})\n", onednn::describe(),
             autocast::cpu_has_native_bf16() ? ", native bf16" : ", no native bf16 on this CPU");
  return true;
}

// The RESULT line's field: " bf16=1" when the run used autocast, else nothing.
inline const char* bf16_field(bool on) { return on ? " bf16=1" : ""; }

}  // namespace nabla::examples
