// The machine profile: every choice that depends on the CPU, in one table keyed by the vector
// ISA (avx512 / avx2 / generic) and the cache sizes, chosen once (at the first call of profile())
// and reported by runtime_info(). Before it, constants measured on one machine decided these
// paths on every machine. The rows and why each value is what it is: make_profile in
// core/machine.cpp.
//
// NABLA_CPU_PROFILE=avx512|avx2|generic in the environment picks another row at start (the
// caches stay the detected ones); tests force rows with ProfileGuard. A row never makes nabla run
// instructions the CPU lacks: the hand-vectorised paths follow min(row, CPU) (`simd`).
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace nabla::machine {

// Ordered: a CPU with avx512 also runs the avx2 and generic paths.
enum class Isa : uint8_t { Generic, Avx2, Avx512 };
const char* isa_name(Isa isa);  // "generic", "avx2", "avx512"

// Bytes; 0 when unknown. L1d and L2 per core, L3 of the core's complex.
struct Caches {
  int64_t l1d = 0, l2 = 0, l3 = 0;
  bool operator==(const Caches&) const = default;
};

struct Profile {
  Isa isa = Isa::Generic;   // the table row
  Isa simd = Isa::Generic;  // the hand-vectorised paths run (Philox): min(isa, the CPU's)
  Caches caches;
  // parallel_for runs a loop on one thread below this many elements x cost (core/parallel.h).
  int64_t parallel_grain = 0;
  // blas::gemm splits a product of at least this many FLOPs across threads, at multiples of
  // gemm_block_align rows or columns (ops/gemm.cpp).
  int64_t gemm_min_split_flop = 0;
  int64_t gemm_block_align = 0;
  // Keys per tile of the fused attention kernels (ops/kernels/attention.cpp).
  int64_t attention_key_tile = 0;
  // blas::gemm runs products of at most this many multiply-adds (M N K) on small_gemm's register
  // tiles (ops/kernels/small_gemm.h) instead of OpenBLAS; 0 never. NABLA_SMALL_GEMM=on|off in the
  // environment sets 64 x 64 x 64, or 0.
  int64_t small_gemm_max_macs = 0;
  // The fused attention kernels compute heads of at most this many queries and keys and this
  // head dim with small_gemm whatever the products' size; 0 never. NABLA_SMALL_ATTENTION=on|off
  // in the environment sets 256 and 64, or 0.
  int64_t attention_small_max_tokens = 0;
  int64_t attention_small_max_head_dim = 0;
  // MultiheadAttention in inference materialises the weights when L * S is at most this
  // (nn/multihead_attention.cpp); above it, and in training, the fused kernel runs.
  int64_t attention_materialize_max_scores = 0;
  // Linear and MultiheadAttention's packed input projection, when no graph is recorded, run
  // float32 products of at least this many FLOPs (2 M N K) through oneDNN on a weight packed once
  // (ops/linear_prepacked.h); smaller ones, and every product when -1, through OpenBLAS.
  // NABLA_INFERENCE_GEMM=openblas|onednn in the environment forces -1 or 0.
  int64_t prepacked_linear_min_flop = -1;
  // Under autocast, scaled_dot_product_attention runs its products on oneDNN's bf16 matmul from
  // this many multiply-adds a head (L * S * head dim); below, the fused float32 kernel on the
  // widened values (ops/autocast.cpp: autocast::attention_kernel).
  int64_t autocast_attention_onednn_min_macs = 0;
  // blas::gemm runs float32 products of at least this many FLOPs (2 M N K) on oneDNN's sgemm
  // (ops/kernels/onednn.h) instead of OpenBLAS, in a build with oneDNN; -1 never. Set where
  // OpenBLAS runs narrower kernels than the CPU has (with_narrow_blas). NABLA_SGEMM=openblas|onednn
  // in the environment forces -1 or 0.
  int64_t onednn_sgemm_min_flop = -1;
  bool operator==(const Profile&) const = default;
};

// The table: the row for `isa`, sized for `caches`. Pure (simd = isa).
Profile make_profile(Isa isa, const Caches& caches);

// What this CPU has (CPUID through __builtin_cpu_supports; under valgrind, what it emulates).
Isa detect_isa();
// OpenBLAS runs narrower vectors than `cpu` has: `core` (openblas_get_corename()) is one of its
// AVX2-or-older kernel sets ("Haswell", "Zen", ...) on an AVX-512 CPU.
bool blas_narrower_than_cpu(Isa cpu, std::string_view core);
// The avx512 row for such a machine: OpenBLAS's small-matrix kernels and full-width GEMM are
// missing there, so small products and short heads take small_gemm (as in the avx2 row) and the
// other float32 products oneDNN's sgemm.
Profile with_narrow_blas(Profile p);
// /sys/devices/system/cpu/cpu0/cache, else sysconf.
Caches detect_caches();
// "32K", "1024K", "32768K", "2M" (sysfs's cache size format) in bytes; 0 if unreadable.
int64_t parse_cache_size(std::string_view text);

namespace detail {
extern std::atomic<const Profile*> current;
const Profile* init();  // detects once, applies NABLA_CPU_PROFILE; thread-safe
}  // namespace detail

// The profile in force: one atomic load on the hot paths.
inline const Profile& profile() {
  const Profile* p = detail::current.load(std::memory_order_acquire);
  return p ? *p : *detail::init();
}
// The row chosen at start (detected, or NABLA_CPU_PROFILE's).
const Profile& startup_profile();

// For tests: makes `p` the profile in force (its simd clamped to the CPU's) until the guard
// ends. Not meant for use while other threads run ops.
class ProfileGuard {
 public:
  explicit ProfileGuard(const Profile& p);
  explicit ProfileGuard(Isa isa);  // make_profile(isa, detected caches)
  ~ProfileGuard();
  ProfileGuard(const ProfileGuard&) = delete;
  ProfileGuard& operator=(const ProfileGuard&) = delete;

 private:
  const Profile* previous_;
};

// One line for runtime_info(): the row, the caches, every value and how the row was chosen.
std::string describe(const Profile& p);

}  // namespace nabla::machine
