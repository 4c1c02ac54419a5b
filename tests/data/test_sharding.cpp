// DataLoader sharding over simulated ranks in one process (data/dataloader.h): disjoint shards
// that cover the epoch, equal batch counts, a data-parallel step equal to one process's batch
// split in order, and a global cursor that resumes on another number of processes.
#include <algorithm>
#include <map>
#include <set>

#include "nabla/core/io/checkpoint.h"
#include "nabla/data/dataloader.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using namespace nabla::data;
using Catch::Matchers::Contains;

using Indices = std::vector<int64_t>;
using Loader = DataLoader<Indices>;

Loader::Options options(int64_t batch, int64_t rank, int64_t world, bool drop_last) {
  Loader::Options o;
  o.batch_size = batch;
  o.seed = 5;
  o.drop_last = drop_last;
  o.rank = rank;
  o.world_size = world;
  return o;
}

Indices identity(const Indices& idx) { return idx; }

// Every batch rank `rank` hands out in the rest of the current epoch.
std::vector<Indices> drain(Loader& loader) {
  std::vector<Indices> batches;
  while (auto b = loader.next()) batches.push_back(*b);
  return batches;
}

// The ranks of one simulated run, each restored to `cursor` (or fresh) and drained.
std::vector<std::vector<Indices>> run_ranks(int64_t n, int64_t batch, int64_t world, bool drop_last,
                                            std::optional<LoaderCursor> cursor = std::nullopt) {
  std::vector<std::vector<Indices>> per_rank;
  for (int64_t r = 0; r < world; ++r) {
    Loader loader(n, options(batch, r, world, drop_last), identity);
    if (cursor) loader.restore(*cursor);
    per_rank.push_back(drain(loader));
  }
  return per_rank;
}

// All ranks' samples, global batch by global batch, rank by rank: the order they were consumed.
Indices consumed_in_order(const std::vector<std::vector<Indices>>& per_rank) {
  Indices all;
  for (size_t b = 0; b < per_rank[0].size(); ++b)
    for (const auto& rank : per_rank) all.insert(all.end(), rank[b].begin(), rank[b].end());
  return all;
}

TEST_CASE("DataLoader shards: disjoint, covering the epoch, equal batch counts", "[data]") {
  for (int64_t n : {0, 1, 7, 10, 37, 64})
    for (int64_t world : {1, 2, 3, 4})
      for (int64_t batch : {1, 3, 5})
        for (bool drop_last : {true, false}) {
          CAPTURE(n, world, batch, drop_last);
          const auto per_rank = run_ranks(n, batch, world, drop_last);
          const int64_t global = batch * world, full = n / global, tail = n % global;
          const Indices order = epoch_order(n, true, 5, 0);
          const Loader one(n, options(batch, 0, world, drop_last), identity);
          for (const auto& rank : per_rank) {
            REQUIRE(static_cast<int64_t>(rank.size()) == one.batches_per_epoch());
            for (size_t b = 0; b < rank.size(); ++b)  // ranks' batch b are the same size
              CHECK(rank[b].size() == per_rank[0][b].size());
          }
          const Indices all = consumed_in_order(per_rank);
          if (drop_last) {
            // The first full * global positions of the epoch's order, each once.
            CHECK(one.batches_per_epoch() == full);
            CHECK(all == Indices(order.begin(), order.begin() + full * global));
          } else {
            // The whole order, then the padding: the epoch's first positions again.
            const int64_t padded = tail == 0 ? 0 : (tail + world - 1) / world * world - tail;
            REQUIRE(static_cast<int64_t>(all.size()) == n + padded);
            CHECK(Indices(all.begin(), all.begin() + n) == order);
            for (int64_t p = 0; p < padded; ++p)
              CHECK(all[static_cast<size_t>(n + p)] == order[static_cast<size_t>(p % n)]);
            CHECK(padded < world);
          }
        }
}

TEST_CASE(
    "DataLoader shards: W ranks with batch B see one process's batch of W * B, split in order",
    "[data]") {
  for (bool drop_last : {true, false}) {
    CAPTURE(drop_last);
    const int64_t n = 40, batch = 4;  // 40 = 5 global batches of 8: no tail either way
    Loader whole(n, options(2 * batch, 0, 1, drop_last), identity);
    const auto per_rank = run_ranks(n, batch, 2, drop_last);
    const std::vector<Indices> single = drain(whole);
    REQUIRE(single.size() == per_rank[0].size());
    for (size_t b = 0; b < single.size(); ++b) {
      Indices joined = per_rank[0][b];
      joined.insert(joined.end(), per_rank[1][b].begin(), per_rank[1][b].end());
      CHECK(joined == single[b]);
    }
  }
  // With a tail of 5 and no drop_last: 3 + 3 on the ranks, the 6th the epoch's first sample.
  const auto per_rank = run_ranks(21, 4, 2, false);
  const Indices order = epoch_order(21, true, 5, 0);
  CHECK(per_rank[0].back() == Indices(order.begin() + 16, order.begin() + 19));
  CHECK(per_rank[1].back() == Indices{order[19], order[20], order[0]});
  // Every epoch is a new order, the same on every rank.
  Loader r0(21, options(4, 0, 2, true), identity), r1(21, options(4, 1, 2, true), identity);
  r0.next_epoch();
  r1.next_epoch();
  const Indices order1 = epoch_order(21, true, 5, 1);
  CHECK(*r0.next() == Indices(order1.begin(), order1.begin() + 4));
  CHECK(*r1.next() == Indices(order1.begin() + 4, order1.begin() + 8));
}

TEST_CASE("DataLoader shards: each rank's cursor resumes that rank exactly", "[data]") {
  for (int64_t r = 0; r < 3; ++r) {
    Loader orig(50, options(4, r, 3, false), identity);
    orig.next_epoch();
    orig.next();
    orig.next();
    const LoaderCursor c = orig.cursor();
    CHECK(c.epoch == 1);
    CHECK(c.batch == 2);
    CHECK(c.sample == 24);  // global: 2 batches of 4 on each of 3 ranks
    CHECK(c.world_size == 3);
    Loader resumed(50, options(4, r, 3, false), identity);
    resumed.restore(c);
    CHECK(drain(resumed) == drain(orig));
    CHECK(resumed.cursor().sample == 50);
    CHECK(resumed.cursor().batch == orig.cursor().batch);
  }
}

TEST_CASE("DataLoader cursor: saved at world 2, resumed at world 1 and 3 at the same sample",
          "[data]") {
  const int64_t n = 61;
  const Indices order = epoch_order(n, true, 5, 2);
  for (bool drop_last : {true, false}) {
    // Two ranks of batch 4 take 3 steps of epoch 2 (24 samples), then rank 0 checkpoints.
    Loader saver(n, options(4, 0, 2, drop_last), identity);
    saver.next_epoch();
    saver.next_epoch();
    for (int i = 0; i < 3; ++i) saver.next();
    io::Checkpoint ck;
    io::save_loader_position(ck, "train", saver.cursor());
    const LoaderCursor saved =
        io::load_loader_position(io::Checkpoint::parse(ck.serialize(), "mem"), "train");
    CHECK(saved.epoch == 2);
    CHECK(saved.sample == 24);
    CHECK(saved.world_size == 2);

    for (auto [world, batch] : {std::pair<int64_t, int64_t>{1, 8}, {1, 3}, {3, 4}, {3, 5}}) {
      CAPTURE(drop_last, world, batch);
      const auto per_rank = run_ranks(n, batch, world, drop_last, saved);
      const Indices rest = consumed_in_order(per_rank);
      const int64_t left = n - 24, global = batch * world;
      if (drop_last) {  // the unconsumed samples in order, less the new tail
        CHECK(rest == Indices(order.begin() + 24, order.begin() + 24 + left / global * global));
      } else {  // exactly the unconsumed samples, then the padding (the epoch's first samples)
        REQUIRE(rest.size() >= static_cast<size_t>(left));
        CHECK(Indices(rest.begin(), rest.begin() + left) ==
              Indices(order.begin() + 24, order.end()));
        CHECK(Indices(rest.begin() + left, rest.end()) ==
              Indices(order.begin(), order.begin() + static_cast<int64_t>(rest.size()) - left));
      }
    }
  }
}

TEST_CASE("DataLoader cursor: an epoch's end is sample n, on any world size", "[data]") {
  // 2 ranks of batch 4 over 21 samples with drop_last: 2 steps, 5 samples dropped.
  Loader saver(21, options(4, 1, 2, true), identity);
  CHECK(drain(saver).size() == 2);
  CHECK(saver.cursor().sample == 21);  // the dropped tail counts as consumed
  Loader resumed(21, options(1, 0, 1, true), identity);
  resumed.restore(saver.cursor());
  CHECK(!resumed.next().has_value());  // not the 5 dropped samples with a smaller batch
  resumed.next_epoch();
  CHECK(resumed.cursor().epoch == 1);
  CHECK(resumed.next().has_value());
}

TEST_CASE("DataLoader cursor: the two-field form and old checkpoints", "[data]") {
  // {epoch, batch} counts whole global batches of the restoring loader, as before sharding.
  Loader a(30, options(4, 1, 2, false), identity), b(30, options(4, 1, 2, false), identity);
  a.next();
  a.next();
  b.restore({0, 2});
  CHECK(b.cursor().sample == 16);
  CHECK(b.cursor().batch == 2);
  CHECK(drain(a) == drain(b));
  b.restore({0, 4});  // the epoch's last batch: at the end
  CHECK(!b.next().has_value());
  CHECK(b.cursor().sample == 30);
  // A checkpoint without ".sample" reads as that form.
  io::Checkpoint ck;
  io::save_loader_position(ck, "train", {3, 2});
  CHECK(!ck.has("loader.train.sample"));
  const LoaderCursor old = io::load_loader_position(ck, "train");
  CHECK(old.sample == -1);
  CHECK(old.world_size == 1);
  ck.set("loader.train.sample", int64_t{-4});
  ck.set("loader.train.world_size", int64_t{2});
  CHECK_THROWS_AS(io::load_loader_position(ck, "train"), FormatError);
}

TEST_CASE("DataLoader sharding: bad ranks and cursors are named", "[data]") {
  CHECK_THROWS_WITH(Loader(10, options(2, 2, 2, false), identity),
                    Contains("DataLoader") && Contains("rank 2 of world_size 2"));
  CHECK_THROWS_WITH(Loader(10, options(2, -1, 2, false), identity), Contains("rank -1"));
  CHECK_THROWS_WITH(Loader(10, options(2, 0, 0, false), identity), Contains("world_size 0"));
  CHECK_THROWS_AS(Loader(-1, options(2, 0, 1, false), identity), ValueError);
  Loader l(10, options(2, 0, 2, false), identity);
  CHECK_THROWS_WITH(l.restore({0, 0, 11, 2}),
                    Contains("DataLoader::restore") && Contains("sample 11") && Contains("10"));
  CHECK_THROWS_WITH(l.restore({0, 4}), Contains("batch 4") && Contains("3 batches"));
  CHECK_THROWS_WITH(l.restore({-1, 0}), Contains("epoch -1"));
  io::Checkpoint ck;
  CHECK_THROWS_WITH(io::save_loader_position(ck, "train", {0, 0, 3, 0}), Contains("world_size 0"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
