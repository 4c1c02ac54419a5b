// optim_step: one optimizer step over float32 parameters shaped like bench/encoder.cpp's
// encoder_small (27 tensors, 525,834 elements), with fixed random gradients; the same as
// bench/py/optim_step.py. Only step() is timed (the gradients stay in place between steps).
//   --optimizer adamw (weight decay 1e-2, as the encoder bench) | adam (no weight decay)
//   --amsgrad   keep the running max of v as well
#include <fmt/format.h>

#include "bench/common.h"
#include "nabla/nabla.h"

using namespace nabla;

namespace {

// encoder_small: Embedding(1000, 128); 2 x TransformerEncoderLayer(d 128, FFN 512) with
// in_proj (384, 128) + bias, out_proj (128, 128) + bias, linear1 (512, 128) + bias,
// linear2 (128, 512) + bias, norm1 and norm2 weight + bias; head Linear(128, 10).
std::vector<Shape> encoder_small_shapes() {
  std::vector<Shape> shapes = {{1000, 128}};
  for (int layer = 0; layer < 2; ++layer) {
    for (Shape s : std::vector<Shape>{{384, 128},
                                      {384},
                                      {128, 128},
                                      {128},
                                      {512, 128},
                                      {512},
                                      {128, 512},
                                      {128},
                                      {128},
                                      {128},
                                      {128},
                                      {128}})
      shapes.push_back(s);
  }
  shapes.push_back({10, 128});
  shapes.push_back({10});
  return shapes;
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"nabla: one Adam/AdamW step over encoder_small's parameters"};
  bench::Options opt;
  std::string optimizer = "adamw";
  bool amsgrad = false;
  bench::add_common_options(app, opt);
  app.add_option("--optimizer", optimizer, "adamw | adam")->check(CLI::IsMember({"adamw", "adam"}));
  app.add_flag("--amsgrad", amsgrad, "AMSGrad variant");
  CLI11_PARSE(app, argc, argv);
  bench::apply_threads(opt);

  Generator gen(0);
  std::vector<Tensor> params;
  int64_t elems = 0;
  for (const Shape& s : encoder_small_shapes()) {
    Tensor p = randn(s, gen).requires_grad_();
    p.set_grad(randn(s, gen));
    params.push_back(p);
    elems += p.numel();
  }
  std::unique_ptr<optim::Optimizer> o;
  if (optimizer == "adamw") {
    o = std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.amsgrad = amsgrad});
  } else {
    o = std::make_unique<optim::Adam>(params, optim::AdamOptions{.amsgrad = amsgrad});
  }

  const double base_rss = bench::peak_rss_mb();
  bench::Timing t = bench::time_it(opt, [&] { o->step(); });
  bench::report(t, base_rss,
                {{"elems", std::to_string(elems)}, {"tensors", std::to_string(params.size())}});
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_optim_step: {}\n", e.what());
  return 1;
}
