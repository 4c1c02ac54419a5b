// attention: scaled dot-product self-attention on float32 q, k, v of --shape N x T x d (N = batch x
// heads), forward only (--mode fwd, nothing recorded) or forward + backward (--mode fwdbwd, with a
// fixed random output gradient). --impl fused runs the flash-style kernel, composite the
// materialising twin. Reports extra_mb: the most memory the call itself allocated (the allocator's
// peak above the inputs), so the growth with T can be read directly.
#include <fmt/format.h>

#include "bench/common.h"
#include "nabla/nabla.h"

using namespace nabla;

int main(int argc, char** argv) try {
  CLI::App app{"nabla: scaled dot-product attention, fused or composite"};
  bench::Options opt;
  std::string impl = "fused", mode = "fwdbwd", shape = "8x1024x64";
  bool causal = false;
  double dropout_p = 0.0;
  bench::add_common_options(app, opt);
  app.add_option("--impl", impl, "fused | composite")->check(CLI::IsMember({"fused", "composite"}));
  app.add_option("--mode", mode, "fwd | fwdbwd")->check(CLI::IsMember({"fwd", "fwdbwd"}));
  app.add_option("--shape", shape, "N x T x d, e.g. 8x1024x64");
  app.add_flag("--causal", causal, "hide keys after the query");
  app.add_option("--dropout", dropout_p, "dropout on the weights")->check(CLI::Range(0.0, 1.0));
  CLI11_PARSE(app, argc, argv);
  bench::apply_threads(opt);

  const std::vector<int64_t> dims = bench::parse_dims(shape);
  if (dims.size() != 3) throw std::invalid_argument("--shape must be N x T x d");
  Generator gen(0);
  Tensor q = randn({dims[0], dims[1], dims[2]}, gen), k = randn(q.shape(), gen);
  Tensor v = randn(q.shape(), gen), g = randn(q.shape(), gen);
  const SdpaOptions o{.dropout_p = dropout_p, .is_causal = causal, .generator = &gen};
  auto forward = [&] {
    return impl == "fused" ? scaled_dot_product_attention(q, k, v, o)
                           : scaled_dot_product_attention_composite(q, k, v, o);
  };
  if (mode == "fwdbwd")
    for (Tensor* t : {&q, &k, &v}) t->requires_grad_();

  const double base_rss = bench::peak_rss_mb();
  const size_t before = allocator::stats().allocated_bytes;
  allocator::reset_peak();
  bench::Timing t;
  if (mode == "fwd") {
    NoGradGuard no_grad;
    t = bench::time_it(opt, [&] { forward(); });
  } else {
    t = bench::time_it(opt, [&] {
      for (Tensor* x : {&q, &k, &v}) x->set_grad(Tensor());
      forward().backward(g);
    });
  }
  const double extra_mb =
      static_cast<double>(allocator::stats().peak_allocated_bytes - before) / (1 << 20);
  bench::report(t, base_rss, {{"extra_mb", fmt::format("{:.2f}", extra_mb)}});
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_attention: {}\n", e.what());
  return 1;
}
