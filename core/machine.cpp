#include "nabla/core/machine.h"

#include <fmt/format.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <mutex>

#include "nabla/core/parallel.h"

namespace nabla::machine {
namespace {

// ----------------------------------------------------------------------------
// The table. Each value is the break-even of a fixed cost (waking the second thread, one BLAS
// call per tile) against work whose speed depends on the vector width, so rows differ where the
// work runs at another speed.
//
// avx512: the values in force before the table, kept for the machines they were measured on
//   (docs/perf.md): the GEMM split on the 2-core Intel Xeon (two 512-bit FMA pipes, 492 GFLOP/s),
//   the parallel grain and the attention path on the 2-core AMD EPYC Zen 4 and the Xeon.
// avx2: not measured yet (the lead times it); from public sources:
//   - parallel_grain stays 131072: bench_parallel_grain measured it on a Zen 4 EPYC, whose
//     AVX-512 instructions run as two halves on 256-bit units (AMD's Zen 4 optimisation guide),
//     so a loop there ran at the per-element speed of 8-lane AVX2 on the same units.
//   - gemm_min_split_flop halves to 1 MFLOP: the 2 MFLOP break-even was measured on the Xeon; an
//     AVX2 machine's FMA peak is ~2.4x lower (202 vs 492 GFLOP/s on 2 cores, issue 16), so a
//     product of half the FLOPs takes as long against the same wake-up cost. OpenBLAS itself
//     threads an sgemm from 65536 x GEMM_MULTITHREAD_THRESHOLD (4) multiply-adds, 0.5 MFLOP, on
//     every target (interface/gemm.c).
//   - gemm_block_align 8: OpenBLAS's HASWELL and ZEN targets (Zen 2/3 and Intel client CPUs)
//     use 8x4 sgemm and 4x8 dgemm micro-kernels, SKYLAKEX 16x4 and 16x2 (param.h,
//     SGEMM_DEFAULT_UNROLL_M/N). The rows of our row-major C are OpenBLAS's N, its columns
//     OpenBLAS's M: a multiple of 8 keeps every split on whole micro-tiles there.
// generic (no AVX2: SSE2 code at 4 lanes): per-element work costs about twice the avx2 row's, so
//   the grain halves; the GEMM split is OpenBLAS's own threshold (0.5 MFLOP); the block align
//   stays 16, a multiple of every x86 target's unroll.
// prepacked_linear_min_flop: oneDNN's f32 product on a weight packed once against OpenBLAS
//   (which packs it again on every call), measured on the Zen 4 only, one thread (docs/perf.md,
//   Inference): oneDNN took 0.6-0.95 of OpenBLAS's time from 0.13 MFLOP (16 x 64 x 64) up to
//   encoder_infer's products, 1.5x on the classifier head (32 x 128 x 10, 0.08 MFLOP); from
//   0.5 MFLOP leaves room for the per-call cost around it. The avx2 and generic rows keep
//   OpenBLAS until measured.
// The attention path: in the avx512 row the fused kernel loses to materialising the weights on
// short heads (inference, L * S <= 64 * 64, measured on the Xeon) through its per-tile
// bookkeeping. In the avx2 row, with both paths' products on small_gemm, the fused kernel won:
// encoder_infer 10.8-11.0 against 12.3-12.5 ms materialised (AVX2 proxy on the Zen 4, alternated,
// 2026-11-27). The key tile is keyed by the L2 (key_tile_for).
// small_gemm (ops/kernels/small_gemm.h: register tiles instead of one BLAS call per product), for
// every product up to 64 x 64 x 64 and for short attention heads, is on in the avx2 row and off in
// the others. OpenBLAS 0.3.21's HASWELL and ZEN
// targets have no small-matrix kernels and pack both operands on every call; on the quiet 2-core
// AMD EPYC Zen 4 with OpenBLAS held to its Zen target and nabla built for znver3 (2026-11-27, two
// threads each running products of 128-256 different heads) small_gemm took 0.55-0.77 of
// OpenBLAS's time on encoder_small's (64, 32) heads and vit_small's (50, 16), 0.85 on 64 x 64 x
// 64, and 0.74-0.80 on encoder_large's tiles of 256 keys except their (64, 32) x (32, 256)^T score
// product (1.15). On AVX-512 OpenBLAS sends these shapes to its own small-matrix kernels (SKYLAKEX,
// COOPERLAKE), which took 0.71-0.91 of small_gemm's time (docs/perf.md). small_gemm's vectors are
// as wide as the build's registers: a build without AVX (plain x86-64) would run it at 4 lanes, so
// there the avx2 row keeps OpenBLAS.
// NABLA_SMALL_ATTENTION=on|off overrides the row.
// with_narrow_blas: the avx512 row assumes OpenBLAS runs its AVX-512 kernels (SKYLAKEX,
//   COOPERLAKE), with their small-matrix paths. Where it runs AVX2 ones instead (pinned to
//   Haswell by OPENBLAS_CORETYPE, as the host of an AMD EPYC Zen 5 does because older OpenBLAS
//   kernels crash or err on some new CPUs; unpinned, Debian's 0.3.21 picks Cooperlake there), its
//   GEMMs reach at most half the FMA peak of a CPU with 512-bit units. There oneDNN's sgemm, whose
//   kernels follow the CPU, took 0.23-0.62 of OpenBLAS's time on the model shapes (2 threads;
//   0.40-0.68 on one; docs/perf.md), and small_gemm takes the heads as in the avx2 row (quiet
//   2-core Zen 5, OpenBLAS pinned to Haswell, 2026-11-27, alternated: encoder_small 40.6 -> 25.0
//   ms, vit_small 128 -> 88, encoder_infer 7.3 -> 6.4, cnn_small 12.1 -> 10.5; docs/perf.md).
// Autocast attention's oneDNN threshold (64 x 64 x 32 multiply-adds a head) is the same in every
// row: only CPUs with native bf16 dot products take oneDNN at all, and those have AVX-512. It was
// measured on the quiet 2-core AMD EPYC Zen 4 (2026-11-26): vit_small's heads (50 tokens x head
// dim 16) took 152 ms a bf16 step through oneDNN, whose per-call cost they do not repay, and
// 107 ms in float32.

constexpr int64_t kQueryTile = 64;  // queries per tile, ops/kernels/attention.cpp
// The heads small_gemm takes when on: up to one key tile of the largest size (the products never
// exceed a query tile by a key tile whatever L and S) and head dims up to 64, where the measured
// shapes end.
constexpr int64_t kSmallAttentionMaxTokens = 256, kSmallAttentionMaxHeadDim = 64;
// Products small_gemm takes anywhere when on: up to 64 x 64 x 64, the largest measured shape
// that all three operand layouts won.
constexpr int64_t kSmallGemmMaxMacs = 64 * 64 * 64;
#if defined(__AVX__)
constexpr bool kBuildHasAvx = true;
#else
constexpr bool kBuildHasAvx = false;
#endif
constexpr int64_t kHeadDimForTiles = 64;

// FlashAttention's rule (Dao et al., 2022, Algorithm 1: block sizes from the on-chip memory
// size M): the tiles one backward step keeps live should fit the fast memory, here the core's
// L2. Those are p, dp, z, pz and the Philox words (query tile x key tile each) and the k, v, dk,
// dv rows of the key tile at head dim 64, in float32. 256 keys need 576 KiB (every machine
// measured so far has 1 MiB or more), 128 need 288 KiB (Zen 2/3: 512 KiB), 64 need 144 KiB
// (Intel client cores before Ice Lake: 256 KiB).
int64_t key_tile_for(int64_t l2_bytes) {
  auto live_bytes = [](int64_t key_tile) {
    return key_tile * (5 * kQueryTile + 4 * kHeadDimForTiles) * int64_t{4};
  };
  if (l2_bytes <= 0) return 256;  // unknown: the measured default
  for (int64_t tile : {256, 128})
    if (live_bytes(tile) <= l2_bytes) return tile;
  return 64;
}

struct State {
  Profile startup;
  std::string origin;  // how the startup row was chosen
};

// A two-way switch in the environment: 1 for `second`, 0 for `first`, noted in `origin`; -1
// when unset or neither.
int env_choice(const char* name, std::string_view first, std::string_view second,
               std::string& origin) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return -1;
  const std::string_view v(env);
  if (v != first && v != second) {
    origin += fmt::format(", {}='{}' ignored ({} or {})", name, v, second, first);
    return -1;
  }
  origin += fmt::format(", {}={}", name, v);
  return v == second ? 1 : 0;
}
int env_on_off(const char* name, std::string& origin) {
  return env_choice(name, "off", "on", origin);
}
int env_library(const char* name, std::string& origin) {  // 1: onednn, 0: openblas
  return env_choice(name, "openblas", "onednn", origin);
}

State make_state() {
  State s;
  const Isa cpu = detect_isa();
  Isa row = cpu;
  s.origin = "detected";
  if (const char* env = std::getenv("NABLA_CPU_PROFILE"); env != nullptr && *env != '\0') {
    const std::string_view v(env);
    bool known = true;
    if (v == "avx512") {
      row = Isa::Avx512;
    } else if (v == "avx2") {
      row = Isa::Avx2;
    } else if (v == "generic") {
      row = Isa::Generic;
    } else {
      known = false;
    }
    s.origin = known ? fmt::format("NABLA_CPU_PROFILE={}", v)
                     : fmt::format(
                           "detected; NABLA_CPU_PROFILE='{}' ignored (avx512, avx2 or "
                           "generic)",
                           v);
  }
  s.startup = make_profile(row, detect_caches());
  s.startup.simd = std::min(row, cpu);
  if (const std::string blas = blas_kernel_set();
      row == Isa::Avx512 && blas_narrower_than_cpu(cpu, blas)) {
    s.startup = with_narrow_blas(s.startup);
    s.origin += fmt::format(", OpenBLAS on its {} kernels", blas);
  }
  if (const int dnnl = env_library("NABLA_INFERENCE_GEMM", s.origin); dnnl >= 0)
    s.startup.prepacked_linear_min_flop = dnnl ? 0 : -1;
  if (const int on = env_on_off("NABLA_SMALL_GEMM", s.origin); on >= 0)
    s.startup.small_gemm_max_macs = on ? kSmallGemmMaxMacs : 0;
  if (const int on = env_on_off("NABLA_SMALL_ATTENTION", s.origin); on >= 0) {
    s.startup.attention_small_max_tokens = on ? kSmallAttentionMaxTokens : 0;
    s.startup.attention_small_max_head_dim = on ? kSmallAttentionMaxHeadDim : 0;
  }
  if (const int dnnl = env_library("NABLA_SGEMM", s.origin); dnnl >= 0)
    s.startup.onednn_sgemm_min_flop = dnnl ? 0 : -1;
  return s;
}

const State& state() {
  static const State s = make_state();
  return s;
}

// Forced profiles live until the process ends: a reader may still hold a reference.
std::mutex forced_mutex;
std::deque<Profile>& forced_profiles() {
  static std::deque<Profile> profiles;
  return profiles;
}

std::string bytes_str(int64_t b) {
  if (b <= 0) return "?";
  if (b % (int64_t{1} << 20) == 0) return fmt::format("{} MiB", b >> 20);
  return fmt::format("{} KiB", b >> 10);
}

int64_t read_cache_file(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  in >> text;
  return in ? parse_cache_size(text) : 0;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512:
      return "avx512";
    case Isa::Avx2:
      return "avx2";
    case Isa::Generic:
      break;
  }
  return "generic";
}

Profile make_profile(Isa isa, const Caches& caches) {
  Profile p;
  p.isa = p.simd = isa;
  p.caches = caches;
  p.attention_key_tile = key_tile_for(caches.l2);
  p.attention_materialize_max_scores = 64 * 64;
  p.small_gemm_max_macs = 0;  // on in the avx2 row only (see the table's notes)
  p.attention_small_max_tokens = 0;
  p.attention_small_max_head_dim = 0;
  p.autocast_attention_onednn_min_macs = 64 * 64 * 32;
  switch (isa) {
    case Isa::Avx512:
      p.parallel_grain = 131072;
      p.gemm_min_split_flop = int64_t{1} << 21;
      p.gemm_block_align = 16;
      p.prepacked_linear_min_flop = int64_t{1} << 19;
      break;
    case Isa::Avx2:
      p.parallel_grain = 131072;
      p.gemm_min_split_flop = int64_t{1} << 20;
      p.gemm_block_align = 8;
      if (kBuildHasAvx) {
        p.small_gemm_max_macs = kSmallGemmMaxMacs;
        p.attention_materialize_max_scores = 0;  // the fused kernel on small_gemm wins (above)
        p.attention_small_max_tokens = kSmallAttentionMaxTokens;
        p.attention_small_max_head_dim = kSmallAttentionMaxHeadDim;
      }
      break;
    case Isa::Generic:
      p.parallel_grain = 65536;
      p.gemm_min_split_flop = int64_t{1} << 19;
      p.gemm_block_align = 16;
      break;
  }
  return p;
}

Isa detect_isa() {
#if defined(__x86_64__)
  // GCC's checks include the OS's support for the wider registers (XCR0).
  if (__builtin_cpu_supports("avx512f")) return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
#endif
  return Isa::Generic;
}

bool blas_narrower_than_cpu(Isa cpu, std::string_view core) {
  if (cpu != Isa::Avx512) return false;
  // OpenBLAS's x86-64 targets with AVX-512 kernels (its param.h); every other one is narrower.
  for (std::string_view wide : {"SkylakeX", "Cooperlake", "SapphireRapids"})
    if (core.size() == wide.size() && ::strncasecmp(core.data(), wide.data(), core.size()) == 0)
      return false;
  return true;
}

Profile with_narrow_blas(Profile p) {
  if (kBuildHasAvx) {
    p.small_gemm_max_macs = kSmallGemmMaxMacs;
    p.attention_materialize_max_scores = 0;
    p.attention_small_max_tokens = kSmallAttentionMaxTokens;
    p.attention_small_max_head_dim = kSmallAttentionMaxHeadDim;
  }
  p.onednn_sgemm_min_flop = 0;
  return p;
}

int64_t parse_cache_size(std::string_view text) {
  int64_t value = 0;
  size_t i = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    if (value > (int64_t{1} << 40)) return 0;  // nonsense, and no overflow below
    value = value * 10 + (text[i] - '0');
  }
  if (i == 0) return 0;
  const std::string_view unit = text.substr(i);
  if (unit.empty()) return value;
  if (unit == "K") return value << 10;
  if (unit == "M") return value << 20;
  if (unit == "G") return value << 30;
  return 0;
}

Caches detect_caches() {
  Caches c;
  const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index";
  for (int i = 0; i < 8; ++i) {
    std::ifstream level_in(dir + std::to_string(i) + "/level");
    std::ifstream type_in(dir + std::to_string(i) + "/type");
    int level = 0;
    std::string type;
    if (!(level_in >> level) || !(type_in >> type)) continue;
    const int64_t size = read_cache_file(dir + std::to_string(i) + "/size");
    if (level == 1 && type == "Data") c.l1d = size;
    if (level == 2 && type != "Instruction") c.l2 = size;
    if (level == 3 && type != "Instruction") c.l3 = size;
  }
  // sysconf's answers come from CPUID too, but some C libraries sum L3 over every complex.
  auto conf = [](int name) { return std::max<int64_t>(0, ::sysconf(name)); };
  if (c.l1d == 0) c.l1d = conf(_SC_LEVEL1_DCACHE_SIZE);
  if (c.l2 == 0) c.l2 = conf(_SC_LEVEL2_CACHE_SIZE);
  if (c.l3 == 0) c.l3 = conf(_SC_LEVEL3_CACHE_SIZE);
  return c;
}

namespace detail {
std::atomic<const Profile*> current{nullptr};

const Profile* init() {
  const Profile* startup = &state().startup;
  const Profile* expected = nullptr;
  // A forced profile set meanwhile wins; otherwise the startup row.
  if (current.compare_exchange_strong(expected, startup, std::memory_order_acq_rel)) return startup;
  return expected;
}
}  // namespace detail

const Profile& startup_profile() { return state().startup; }

ProfileGuard::ProfileGuard(const Profile& p) : previous_(&profile()) {
  Profile clamped = p;
  clamped.simd = std::min(p.simd, detect_isa());
  const Profile* stored;
  {
    std::lock_guard lock(forced_mutex);
    stored = &forced_profiles().emplace_back(clamped);
  }
  detail::current.store(stored, std::memory_order_release);
}

ProfileGuard::ProfileGuard(Isa isa) : ProfileGuard(make_profile(isa, detect_caches())) {}

ProfileGuard::~ProfileGuard() { detail::current.store(previous_, std::memory_order_release); }

std::string describe(const Profile& p) {
  const bool startup = &p == &state().startup;
  std::string simd = isa_name(p.simd);
  if (p.simd != p.isa) simd += fmt::format(" (the CPU lacks {})", isa_name(p.isa));
  return fmt::format(
      "machine profile {} ({}; L1d {}, L2 {}, L3 {}): parallel grain {}, GEMM split from {} "
      "FLOP in blocks of {}, products up to {} multiply-adds on register tiles, attention key tile "
      "{}, small attention heads up to {} tokens and head dim {}, materialised attention up to {} "
      "scores, "
      "inference linear {}, float32 GEMMs on {}, autocast attention on oneDNN from {} "
      "multiply-adds a head, SIMD paths {}",
      isa_name(p.isa), startup ? state().origin : std::string("forced"), bytes_str(p.caches.l1d),
      bytes_str(p.caches.l2), bytes_str(p.caches.l3), p.parallel_grain, p.gemm_min_split_flop,
      p.gemm_block_align, p.small_gemm_max_macs, p.attention_key_tile, p.attention_small_max_tokens,
      p.attention_small_max_head_dim, p.attention_materialize_max_scores,
      p.prepacked_linear_min_flop < 0
          ? std::string("OpenBLAS")
          : fmt::format("prepacked oneDNN from {} FLOP (OpenBLAS below or without oneDNN)",
                        p.prepacked_linear_min_flop),
      p.onednn_sgemm_min_flop < 0
          ? std::string("OpenBLAS")
          : fmt::format("oneDNN's sgemm from {} FLOP (OpenBLAS without oneDNN)",
                        p.onednn_sgemm_min_flop),
      p.autocast_attention_onednn_min_macs, simd);
}

}  // namespace nabla::machine
