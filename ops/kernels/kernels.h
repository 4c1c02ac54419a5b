// Which kernel a fused op runs. Each fused op keeps a plain reference kernel (the scalar loop a
// reader studies, and the oracle of its tests) in its own ops/<family>.cpp; the tuned kernels
// (SIMD lanes, transposed tiles, per-thread buffers) live beside this header in ops/kernels/.
// Setting NABLA_KERNELS=reference in the environment, or calling set_tuned_kernels(false), makes
// every op run its reference kernel: the test suite runs once that way too.
#pragma once

namespace nabla::kernels {

bool tuned_enabled();             // true unless NABLA_KERNELS=reference or switched off
void set_tuned_kernels(bool on);  // for tests and for reading along in a debugger

// Switches the tuned kernels off (or on) for one scope and restores the previous choice.
class TunedKernelsGuard {
 public:
  explicit TunedKernelsGuard(bool on) : previous_(tuned_enabled()) { set_tuned_kernels(on); }
  ~TunedKernelsGuard() { set_tuned_kernels(previous_); }
  TunedKernelsGuard(const TunedKernelsGuard&) = delete;
  TunedKernelsGuard& operator=(const TunedKernelsGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace nabla::kernels
