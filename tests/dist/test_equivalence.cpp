// Issue 24's correctness criterion: 20 steps of a small Transformer encoder on N ranks with batch
// B each equal 20 steps on one process with batch N*B: losses and final parameters within 1e-6
// (relative, per tensor in max norm) in float32, and bitwise in float64, where DDP sums in rank
// order (GradReduction::Auto) and the one-process reference takes its batch as the same N chunks,
// adds their gradients in the same order and divides by N.
//
// Against one batch of N*B the float32 comparison uses SGD with momentum: AdamW divides each
// gradient by its running RMS, so a gradient that is zero up to rounding (the attention key bias:
// softmax ignores a shift shared by a row) becomes steps of size lr in the direction of the
// rounding noise, and the runs part by ~1e-2 however exact the all-reduce is. AdamW is held to the
// chunked reference instead, bitwise in float64.
#include <catch2/catch.hpp>

#include <cmath>

#include "nabla/nabla.h"
#include "nabla/nn/distributed/data_parallel.h"
#include "tests/small_encoder_trainer.h"

namespace {

using namespace nabla;
namespace dist = nabla::dist;

constexpr int64_t kPerRank = 4;
constexpr int kSteps = 20;

enum class Mode { OneBatch, Chunks, DataParallel };
enum class Opt { Sgd, AdamW };

struct Run {
  std::vector<double> losses;
  std::vector<Tensor> params;
};

test::SmallEncoderOptions options() {
  test::SmallEncoderOptions o;
  o.dropout = 0.0;  // each rank would draw its own masks
  o.batch = kPerRank * dist::world_size();
  o.layers = 1;
  return o;
}

// SmallEncoderTrainer::batch: step s's whole batch, from (seed, s) alone.
std::pair<Tensor, Tensor> whole_batch(const test::SmallEncoderOptions& o, int64_t s) {
  Generator g(o.seed * 1000003 + static_cast<uint64_t>(s));
  const int64_t len = o.lengths[static_cast<size_t>(s) % o.lengths.size()];
  Tensor tokens = randint(0, o.vocab, {o.batch, len}, g);
  const std::vector<int64_t> t = tokens.to_vector<int64_t>();
  std::vector<int64_t> labels(static_cast<size_t>(o.batch), 0);
  for (size_t i = 0; i < t.size(); ++i) labels[i / static_cast<size_t>(len)] += t[i];
  for (int64_t& l : labels) l %= o.classes;
  return {tokens, from_vector(labels, {o.batch})};
}

Run train(DType dt, Mode mode, Opt opt) {
  const test::SmallEncoderOptions o = options();
  manual_seed(o.seed);
  auto model = std::make_shared<test::SmallEncoderModel>(o);
  model->to(dt);
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  if (mode == Mode::DataParallel) ddp = std::make_unique<dist::DistributedDataParallel>(model);
  std::unique_ptr<optim::Optimizer> optimizer;
  if (opt == Opt::AdamW)
    optimizer =
        std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 3e-3});
  else
    optimizer = std::make_unique<optim::SGD>(model->parameters(),
                                             optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  const int world = dist::world_size();
  Run run;
  for (int64_t s = 0; s < kSteps; ++s) {
    const auto [tokens, labels] = whole_batch(o, s);
    auto rows = [&](const Tensor& t, int r) { return t.narrow(0, r * kPerRank, kPerRank); };
    optimizer->zero_grad();
    Tensor loss;
    if (mode == Mode::OneBatch) {
      loss = cross_entropy(model->forward(tokens), labels);
      loss.backward();
    } else if (mode == Mode::Chunks) {
      for (int r = 0; r < world; ++r) {
        Tensor part = cross_entropy(model->forward(rows(tokens, r)), rows(labels, r));
        part.backward();
        loss = r == 0 ? part.detach() : add(loss, part.detach());
      }
      loss = div(loss, double(world));
      for (Tensor& p : model->parameters()) p.set_grad(div(p.grad(), double(world)));
    } else {
      const int r = dist::rank();
      Tensor part = cross_entropy(model->forward(rows(tokens, r)), rows(labels, r));
      ddp->backward(part);
      loss = dist::all_reduce(part.detach(), dist::ReduceOp::Mean, /*rank_order=*/true);
    }
    optim::clip_grad_norm_(model->parameters(), 1.0);
    optimizer->step();
    run.losses.push_back(loss.item());
  }
  for (const Tensor& p : model->parameters()) run.params.push_back(p.detach().clone());
  return run;
}

// max |a - b| / max |b|
double relative_error(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to(kFloat64).to_vector<double>();
  const std::vector<double> y = b.to(kFloat64).to_vector<double>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

}  // namespace

TEST_CASE("DistributedDataParallel: N ranks x batch B == one process x batch N*B, float32",
          "[equivalence]") {
  const Run ddp = train(kFloat32, Mode::DataParallel, Opt::Sgd);
  const Run one = train(kFloat32, Mode::OneBatch, Opt::Sgd);
  for (int s = 0; s < kSteps; ++s) {
    INFO("step " << s << ": " << ddp.losses[s] << " vs " << one.losses[s]);
    CHECK(std::abs(ddp.losses[s] - one.losses[s]) <= 1e-6 * std::abs(one.losses[s]));
  }
  CHECK(ddp.losses.back() != ddp.losses.front());  // the weights moved
  double worst = 0;
  for (size_t i = 0; i < ddp.params.size(); ++i)
    worst = std::max(worst, relative_error(ddp.params[i], one.params[i]));
  INFO("worst parameter relative error " << worst);
  CHECK(worst <= 1e-6);
}

TEST_CASE("DistributedDataParallel: N ranks x batch B == one process x batch N*B, float64",
          "[equivalence]") {
  // Bitwise against the chunked reference, with either optimizer.
  for (Opt opt : {Opt::Sgd, Opt::AdamW}) {
    const Run ddp = train(kFloat64, Mode::DataParallel, opt);
    const Run chunks = train(kFloat64, Mode::Chunks, opt);
    CHECK(ddp.losses == chunks.losses);
    for (size_t i = 0; i < ddp.params.size(); ++i) {
      INFO("parameter " << i);
      CHECK(ddp.params[i].to_vector<double>() == chunks.params[i].to_vector<double>());
    }
  }
  // And the same optimisation as one batch of N*B, to float64 rounding.
  const Run ddp = train(kFloat64, Mode::DataParallel, Opt::Sgd);
  const Run one = train(kFloat64, Mode::OneBatch, Opt::Sgd);
  for (size_t i = 0; i < ddp.params.size(); ++i) {
    INFO("parameter " << i << ": " << relative_error(ddp.params[i], one.params[i]));
    CHECK(relative_error(ddp.params[i], one.params[i]) <= 1e-12);
  }
  for (int s = 0; s < kSteps; ++s)
    CHECK(std::abs(ddp.losses[s] - one.losses[s]) <= 1e-12 * std::abs(one.losses[s]));
}
