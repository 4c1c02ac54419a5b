// nabla::checkpoint (core/grad_checkpoint.h): gradients bitwise the unchecked ones with dropout
// on (the default generator and another one), several inputs and outputs, an input without
// grad, captured parameters, autograd::grad, nesting, retain_graph; nothing saved between forward
// and backward; gradcheck through it; and the errors (in-place changes, train/eval switch,
// changed shapes); double backward.
#include <cstring>
#include <memory>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

using test::bit_equal;

Tensor random_leaf(const Shape& shape, DType dt, uint64_t seed, bool requires_grad = true) {
  Generator g(seed);
  Tensor t = mul(randn(shape, g, dt), 0.5);
  if (requires_grad) t.requires_grad_();
  return t;
}

// A small MLP block: dropout (the default generator) -> linear -> tanh -> dropout (its own
// generator) -> linear. Everything it needs is held by value (shared_ptrs), as checkpoint asks.
struct Block {
  Tensor w1, b1, w2;
  std::shared_ptr<Generator> gen;
  Tensor operator()(const Tensor& x) const {
    Tensor h = tanh(linear(dropout(x, 0.25), w1, b1));
    return linear(dropout(h, 0.4, true, *gen), w2);
  }
};

Block make_block(DType dt, uint64_t seed) {
  return {random_leaf({16, 12}, dt, seed), random_leaf({16}, dt, seed + 1),
          random_leaf({12, 16}, dt, seed + 2), std::make_shared<Generator>(seed + 3)};
}

// Runs two blocks (checkpointed or not) with a dropout between them, backpropagates a weighted
// sum, and returns x's gradient and every parameter's, then the generators' offsets.
std::vector<Tensor> mlp_gradients(bool checkpointed, DType dt, std::vector<uint64_t>& offsets) {
  manual_seed(11);
  Block a = make_block(dt, 1), b = make_block(dt, 5);
  Tensor x = random_leaf({8, 12}, dt, 9);
  auto run = [&](const Block& blk, const Tensor& in) {
    return checkpointed ? checkpoint(blk, in) : blk(in);
  };
  Tensor y = run(b, dropout(run(a, x), 0.1));
  Tensor loss = sum(mul(y, random_leaf({8, 12}, dt, 3, false)));
  loss.backward();
  offsets = {default_generator().offset(), a.gen->offset(), b.gen->offset()};
  return {x.grad(), a.w1.grad(), a.b1.grad(), a.w2.grad(), b.w1.grad(), b.b1.grad(), b.w2.grad()};
}

void check_all_bit_equal(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("gradient " << i);
    REQUIRE(got[i].defined());
    CHECK(bit_equal(got[i], want[i]));
  }
}

}  // namespace

TEST_CASE("checkpoint: MLP gradients are bitwise the unchecked ones, dropout on", "[core]") {
  for (DType dt : {kFloat32, kFloat64}) {
    INFO(dtype_name(dt));
    std::vector<uint64_t> plain_offsets, checked_offsets;
    const auto want = mlp_gradients(false, dt, plain_offsets);
    const auto got = mlp_gradients(true, dt, checked_offsets);
    check_all_bit_equal(got, want);
    // The recompute replays the draws and puts the generators back where they were.
    CHECK(checked_offsets == plain_offsets);
  }
}

TEST_CASE("checkpoint: a generator made inside the function replays by itself", "[core]") {
  auto grads = [](bool checkpointed) {
    Tensor x = random_leaf({5, 7}, kFloat32, 1);
    auto fn = [](const Tensor& in) {
      Generator local(42);
      return exp(dropout(tanh(in), 0.5, true, local));
    };
    sum(checkpointed ? checkpoint(fn, x) : fn(x)).backward();
    return std::vector<Tensor>{x.grad()};
  };
  check_all_bit_equal(grads(true), grads(false));
}

TEST_CASE("checkpoint: several inputs and outputs, an input without grad, a captured weight",
          "[core]") {
  auto grads = [](bool checkpointed) {
    manual_seed(3);
    Tensor a = random_leaf({4, 5}, kFloat64, 1), b = random_leaf({4, 5}, kFloat64, 2, false);
    Tensor w = random_leaf({5, 5}, kFloat64, 3);
    auto fn = [w](const Tensor& p, const Tensor& q) {
      Tensor h = dropout(matmul(p, w), 0.3);
      return std::vector<Tensor>{mul(h, q), exp(h)};
    };
    auto ys = checkpointed ? checkpoint(fn, a, b) : fn(a, b);
    add(sum(mul(ys[0], ys[1])), sum(ys[1])).backward();
    CHECK_FALSE(b.grad().defined());
    return std::vector<Tensor>{a.grad(), w.grad()};
  };
  check_all_bit_equal(grads(true), grads(false));
}

TEST_CASE("checkpoint: no input requires grad, the captured parameters still get gradients",
          "[core]") {
  Tensor w = random_leaf({3, 3}, kFloat64, 4);
  Tensor x = random_leaf({2, 3}, kFloat64, 5, false);
  Tensor y = checkpoint([w](const Tensor& in) { return tanh(matmul(in, w)); }, x);
  REQUIRE(y.requires_grad());
  sum(y).backward();
  Tensor want = matmul(x.transpose(0, 1), sub(1.0, pow(tanh(matmul(x, w)), 2.0))).detach();
  CHECK_CLOSE(w.grad(), want, 1e-12, 1e-12);
}

TEST_CASE("checkpoint: autograd::grad reaches parameters inside the function", "[core]") {
  Tensor x = random_leaf({4, 6}, kFloat64, 1), w = random_leaf({6, 6}, kFloat64, 2);
  auto fn = [w](const Tensor& in) { return sigmoid(matmul(tanh(in), w)); };
  auto want = autograd::grad({sum(fn(x))}, {x, w});
  auto got = autograd::grad({sum(checkpoint(fn, x))}, {x, w});
  check_all_bit_equal(got, want);
  CHECK_FALSE(w.grad().defined());  // autograd::grad does not touch .grad
}

TEST_CASE("checkpoint: nested checkpoints, a list of inputs, gradients bitwise", "[core]") {
  auto grads = [](bool checkpointed) {
    manual_seed(5);
    Tensor x = random_leaf({6, 8}, kFloat32, 1), w = random_leaf({8, 8}, kFloat32, 2);
    auto inner = [w](const Tensor& h) { return dropout(relu(matmul(h, w)), 0.2); };
    auto outer = [inner, checkpointed](const std::vector<Tensor>& in) {
      Tensor h = dropout(tanh(in[0]), 0.3);
      h = checkpointed ? checkpoint(inner, h) : inner(h);
      return sum(matmul(h, in[1]));
    };
    Tensor s = checkpointed ? checkpoint(outer, std::vector<Tensor>{x, w}) : outer({x, w});
    s.backward();
    return std::vector<Tensor>{x.grad(), w.grad()};
  };
  check_all_bit_equal(grads(true), grads(false));
}

TEST_CASE("checkpoint: fn runs twice, once with retain_graph reused by a second backward",
          "[core]") {
  auto calls = std::make_shared<int>(0);
  Tensor x = random_leaf({3, 4}, kFloat64, 1);
  auto fn = [calls](const Tensor& in) {
    ++*calls;
    return exp(tanh(in));
  };
  Tensor y = sum(checkpoint(fn, x));
  CHECK(*calls == 1);
  y.backward(Tensor(), /*retain_graph=*/true);
  CHECK(*calls == 2);
  Tensor first = x.grad().clone();
  y.backward();
  CHECK(*calls == 2);  // the recomputed tensors were kept with the graph
  CHECK_CLOSE(x.grad(), mul(first, 2.0), 0, 0);
}

TEST_CASE("checkpoint: under NoGradGuard it only runs fn", "[core]") {
  auto calls = std::make_shared<int>(0);
  Tensor x = random_leaf({3, 4}, kFloat64, 1);
  const int64_t nodes_before = live_objects().nodes;
  NoGradGuard no_grad;
  Tensor y = checkpoint(
      [calls](const Tensor& in) {
        ++*calls;
        return exp(in);
      },
      x);
  CHECK(*calls == 1);
  CHECK_FALSE(y.requires_grad());
  CHECK(live_objects().nodes == nodes_before);
  CHECK(bit_equal(y, exp(x)));
}

TEST_CASE("checkpoint: activations are not kept between forward and backward", "[core]") {
  // Eight tanh(linear) layers: unchecked, each keeps its input and output for backward.
  std::vector<Tensor> ws;
  for (uint64_t i = 0; i < 8; ++i) ws.push_back(random_leaf({64, 64}, kFloat32, i));
  Tensor x = random_leaf({32, 64}, kFloat32, 99);
  auto fn = [ws](const Tensor& in) {
    Tensor h = in;
    for (const Tensor& w : ws) h = tanh(linear(h, w));
    return h;
  };
  const LiveObjects before = live_objects();
  const size_t bytes_before = allocator::live_bytes();
  int64_t plain_storages = 0, checked_storages = 0;
  {
    Tensor y = fn(x);
    plain_storages = live_objects().storages - before.storages;
  }
  {
    Tensor y = checkpoint(fn, x);
    checked_storages = live_objects().storages - before.storages;
    CHECK(checked_storages == 1);  // y alone: x and the weights existed before
    CHECK(allocator::live_bytes() - bytes_before <= 2 * 32 * 64 * sizeof(float));
    sum(y).backward();
    CHECK(ws[0].grad().defined());
  }
  CHECK(plain_storages >= 8);
  for (Tensor& w : ws) w.set_grad(Tensor());
  x.set_grad(Tensor());
  CHECK(live_objects() == before);  // the graph, the frame and the recomputed tensors are gone
}

TEST_CASE("checkpoint: float64 gradcheck through a checkpointed function", "[core]") {
  auto fn = [](const std::vector<Tensor>& in) {
    auto body = [](const Tensor& a, const Tensor& b) { return mul(tanh(matmul(a, b)), a); };
    return checkpoint(body, in[0], in[1]);
  };
  CHECK_GRADCHECK(fn, (std::vector<Tensor>{test::leaf({3, 3}, 1), test::leaf({3, 3}, 2)}));
  // A non-contiguous view and a size-1 dim as inputs.
  CHECK_GRADCHECK(
      fn, (std::vector<Tensor>{test::leaf({3, 3}, 3).transpose(0, 1), test::leaf({3, 3}, 4)}));
  CHECK_GRADCHECK(fn, (std::vector<Tensor>{test::leaf({1, 1}, 5), test::leaf({1, 1}, 6)}));
}

TEST_CASE("checkpoint: errors name what changed between forward and backward", "[core]") {
  Tensor w = random_leaf({4, 4}, kFloat64, 1);
  SECTION("an input changed in place") {
    Tensor x = random_leaf({2, 4}, kFloat64, 2, false);
    Tensor y = checkpoint([w](const Tensor& in) { return tanh(matmul(in, w)); }, x);
    x.fill_(1.0);
    REQUIRE_THROWS_WITH(sum(y).backward(),
                        Contains("CheckpointBackward") && Contains("modified by an in-place"));
  }
  SECTION("a captured weight changed in place (an optimizer step before backward)") {
    Tensor x = random_leaf({2, 4}, kFloat64, 2);
    Tensor y = checkpoint([w](const Tensor& in) { return tanh(matmul(in, w)); }, x);
    {
      NoGradGuard no_grad;
      w.fill_(0.5);
    }
    REQUIRE_THROWS_WITH(sum(y).backward(), Contains("checkpoint") && Contains("version") &&
                                               Contains("modified in place"));
  }
  SECTION("dropout switched off (train/eval) between forward and backward") {
    auto training = std::make_shared<bool>(true);
    Tensor x = random_leaf({2, 4}, kFloat64, 2);
    Tensor y = checkpoint(
        [w, training](const Tensor& in) { return matmul(dropout(in, 0.5, *training), w); }, x);
    *training = false;
    REQUIRE_THROWS_WITH(sum(y).backward(), Contains("checkpoint") && Contains("train/eval"));
  }
  SECTION("other random draws in the recompute") {
    auto draw = std::make_shared<bool>(true);
    Tensor x = random_leaf({2, 4}, kFloat64, 2);
    Tensor y = checkpoint(
        [draw](const Tensor& in) {
          if (*draw) (void)rand({8});
          return tanh(in);
        },
        x);
    *draw = false;
    REQUIRE_THROWS_WITH(sum(y).backward(),
                        Contains("drew nothing from a generator its forward drew 8 counters"));
  }
  SECTION("a shape that changed") {
    auto rows = std::make_shared<int64_t>(2);
    Tensor x = random_leaf({3, 4}, kFloat64, 2);
    Tensor y = checkpoint(
        [w, rows](const Tensor& in) { return tanh(matmul(in.narrow(0, 0, *rows), w)); }, x);
    *rows = 1;
    REQUIRE_THROWS_WITH(sum(y).backward(), Contains("differs from its forward") &&
                                               Contains("(2, 4)") && Contains("(1, 4)"));
  }
}

TEST_CASE("checkpoint: double backward through a checkpointed function", "[core]") {
  Tensor x = random_leaf({3, 4}, kFloat64, 1), w = random_leaf({4, 4}, kFloat64, 2);
  Tensor c = random_leaf({3, 4}, kFloat64, 3, false);
  auto fn = [w](const Tensor& in) { return mul(tanh(matmul(in, w)), in); };
  auto second = [&](bool checkpointed) {
    Tensor y = checkpointed ? checkpoint(fn, x) : fn(x);
    auto g = autograd::grad({sum(mul(y, c))}, {x, w}, {}, false, /*create_graph=*/true);
    return autograd::grad({add(sum(mul(g[0], g[0])), sum(pow(g[1], 3.0)))}, {x, w});
  };
  const auto want = second(false), got = second(true);
  CHECK_CLOSE(got[0], want[0], 1e-12, 1e-12);
  CHECK_CLOSE(got[1], want[1], 1e-12, 1e-12);
  auto checked = [](const std::vector<Tensor>& in) {
    return checkpoint([](const Tensor& a, const Tensor& b) { return mul(tanh(matmul(a, b)), a); },
                      in[0], in[1]);
  };
  CHECK_GRADGRADCHECK(checked, (std::vector<Tensor>{test::leaf({2, 3}, 1), test::leaf({3, 3}, 2)}));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
