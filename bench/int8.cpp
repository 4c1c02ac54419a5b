// int8: dynamic int8 quantisation of the encoder_infer model (bench/encoder_model.h, eval mode,
// no grad; --config small, or large where the products dominate more), against the same model
// in float32; the twin is bench/py/int8.py (torch.ao.quantization.quantize_dynamic, per-channel
// qint8 weights, on the same model).
// --precision float32 | int8: one MEASURE line for that precision (what bench/run.py compares with
// the twin); both (the default): the two MEASURE lines, then
//   RESULT bench=int8 float_ms=... int8_ms=... int8_over_float=... float_weight_bytes=...
//          int8_weight_bytes=... scale_bytes=... weight_ratio=... weight_ratio_with_scales=...
//          packed_cache_bytes=... model_ratio=... quantised=<Linears + attention in_proj>
// weight bytes (nn::quantized_size): the quantised weights in float32 and as stored in int8
// (unpadded); their float32 scales apart; oneDNN's packed runtime copy (padding, column sums) is
// not model size and is reported apart. model_ratio: every parameter, float32 over quantised.
// Target (issue 22): int8_over_float <= 0.6 on VNNI/AMX CPUs.
#include <fmt/format.h>

#include "bench/common.h"
#include "bench/encoder_model.h"
#include "nabla/nabla.h"
#include "nabla/nn/quantized.h"
#include "nabla/ops/kernels/onednn.h"

using namespace nabla;

int main(int argc, char** argv) try {
  CLI::App app{"nabla: the encoder_infer model in float32 and with int8 Linear layers"};
  bench::Options opt;
  std::string config = "small", precision = "both";
  bench::add_common_options(app, opt);
  app.add_option("--config", config, "small | large")->check(CLI::IsMember({"small", "large"}));
  app.add_option("--precision", precision, "float32 | int8 | both")
      ->check(CLI::IsMember({"float32", "int8", "both"}));
  CLI11_PARSE(app, argc, argv);
  bench::apply_threads(opt);
  onednn::require("bench_int8");

  const bench::Config c = bench::config_named(config);
  manual_seed(0);
  bench::EncoderClassifier model(c);
  model.eval();
  Generator gen(1);
  const Tensor tokens = randint(0, c.vocab, {c.batch, c.seq}, gen);
  NoGradGuard no_grad;
  const double base_rss = bench::peak_rss_mb();

  bench::Timing float_timing, int8_timing;
  if (precision != "int8") {
    float_timing = bench::time_it(opt, [&] { model.forward(tokens); });
    bench::report(float_timing, base_rss, {{"precision", "float32"}});
  }
  const int64_t count = nn::quantize_dynamic(model);
  const nn::QuantizedSize size = nn::quantized_size(model);
  const bench::Fields bytes = {{"float_weight_bytes", std::to_string(size.float_bytes)},
                               {"int8_weight_bytes", std::to_string(size.int8_bytes)},
                               {"scale_bytes", std::to_string(size.scale_bytes)},
                               {"packed_cache_bytes", std::to_string(size.cache_bytes)}};
  auto ratio = [](int64_t a, int64_t b) {
    return static_cast<double>(a) / static_cast<double>(std::max<int64_t>(b, 1));
  };
  if (precision != "float32") {
    int8_timing = bench::time_it(opt, [&] { model.forward(tokens); });
    bench::Fields fields = {{"precision", "int8"}, {"quantised", std::to_string(count)}};
    fields.insert(fields.end(), bytes.begin(), bytes.end());
    bench::report(int8_timing, base_rss, fields);
  }
  if (precision == "both")
    fmt::print(
        "RESULT bench=int8 config={} float_ms={:.3f} int8_ms={:.3f} int8_over_float={:.3f} "
        "float_weight_bytes={} int8_weight_bytes={} scale_bytes={} weight_ratio={:.2f} "
        "weight_ratio_with_scales={:.2f} packed_cache_bytes={} model_ratio={:.2f} quantised={} "
        "backend=\"{}\"\n",
        config, float_timing.median_ms, int8_timing.median_ms,
        int8_timing.median_ms / float_timing.median_ms, size.float_bytes, size.int8_bytes,
        size.scale_bytes, ratio(size.float_bytes, size.int8_bytes),
        ratio(size.float_bytes, size.int8_bytes + size.scale_bytes), size.cache_bytes,
        ratio(size.model_float_bytes, size.model_quantized_bytes), count, onednn::describe());
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_int8: {}\n", e.what());
  return 1;
}
