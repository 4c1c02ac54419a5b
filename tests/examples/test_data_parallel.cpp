// The trainers' data-parallel pieces that need no MPI (examples/common/data_parallel.h,
// TrainingRun's writer): the shares of a global batch and their loss factors, and a rank other
// than 0 writing nothing.
#include "examples/common/data_parallel.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "examples/common/training_run.h"
#include "tests/helpers.h"

using namespace nabla;
using examples::DataParallel;

TEST_CASE("DataParallel shares: contiguous, covering, loss factors give the global mean",
          "[examples][data_parallel]") {
  for (int64_t n = 1; n <= 20; ++n)
    for (int world = 1; world <= 4; ++world) {
      CAPTURE(n, world);
      std::vector<int64_t> global(static_cast<size_t>(n));
      std::iota(global.begin(), global.end(), 100);
      std::vector<int64_t> joined;
      double mean_of_ranks = 0;  // what DDP's gradient mean does to the ranks' losses
      for (int r = 0; r < world; ++r) {
        const DataParallel::Share s = DataParallel::share_of(global, r, world);
        REQUIRE(!s.ids.empty());
        double mean = 0;
        for (int64_t id : s.ids) mean += static_cast<double>(id);
        mean /= static_cast<double>(s.ids.size());
        mean_of_ranks += s.loss_factor * mean / world;
        if (s.loss_factor != 0) joined.insert(joined.end(), s.ids.begin(), s.ids.end());
        if (n % world == 0) CHECK(s.loss_factor == 1);  // even shares: the loss untouched
      }
      CHECK(joined == global);
      CHECK(std::abs(mean_of_ranks - (99.5 + static_cast<double>(n) / 2)) < 1e-9);
    }
  CHECK_THROWS_WITH(DataParallel::share_of({}, 0, 2), Catch::Matchers::Contains("empty"));
  const DataParallel one;  // no mpirun: rank 0 of 1, the writer
  CHECK(one.writer());
  CHECK(one.per_rank_batch(64) == 64);
  CHECK(one.mean(2.5) == 2.5);
}

TEST_CASE("TrainingRun: a rank other than 0 writes neither metrics nor checkpoints",
          "[examples][data_parallel]") {
  using Batch = std::vector<int64_t>;
  for (bool writer : {true, false}) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("nabla_writer_" + std::to_string(::getpid()) + (writer ? "_w" : "_r"));
    std::filesystem::create_directories(dir);
    auto model = std::make_shared<nn::Linear>(2, 1);
    optim::SGD opt(model->parameters(), {.lr = 0.1});
    data::DataLoader<Batch> loader(8, {.batch_size = 4}, [](const Batch& idx) { return idx; });
    examples::TrainingRun run({.out = dir.string(),
                               .steps_per_epoch = 2,
                               .total_steps = 2,
                               .metrics = {},
                               .writer = writer},
                              *model, opt, nullptr, loader);
    int64_t steps = 0;
    while (auto batch = run.next_batch(loader))
      if (run.step_done(1.0, static_cast<int64_t>(batch->size()))) run.end_epoch({}), ++steps;
    CHECK(steps == 1);
    CHECK(run.step() == 2);
    CHECK(std::filesystem::exists(dir / "metrics.csv") == writer);
    CHECK(std::filesystem::exists(dir / "checkpoint.safetensors") == writer);
    std::filesystem::remove_all(dir);
  }
}
