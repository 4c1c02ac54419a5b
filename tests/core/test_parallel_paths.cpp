// The parallel paths of the kernels, exercised on purpose: most test tensors are below
// parallel_grain() and run on one thread. Each op here runs on sizes above the grain with one
// thread and with two, and the results must be bitwise equal (every kernel splits work so that
// no sum depends on the thread count). GEMMs are the exception: OpenBLAS blocks differently per
// thread count, so linear is only checked to rounding.
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

TEST_CASE("kernels give bitwise the same result on one thread and on two", "[core]") {
  Generator g(3);
  const int64_t rows = 2 * parallel_grain() / 256 + 7;  // above the grain for every op below
  Tensor x = randn({rows, 256}, g), b = randn({256}, g);
  Tensor w = randn({64, 256}, g), q = randn({32, 70, 16}, g), k = randn({32, 90, 16}, g);
  Tensor v = randn({32, 90, 8}, g), t = randint(0, 256, {rows}, g);
  auto run_all = [&] {
    Generator dg(5);
    return std::vector<Tensor>{
        add(x, b),
        gelu(x),
        softmax(x, -1),
        layer_norm(x, {256}, b, b),
        sum(x, {0}),
        cross_entropy(x, t),
        dropout(x, 0.3, true, dg),
        scaled_dot_product_attention(q, k, v, {.dropout_p = 0.2, .generator = &dg})};
  };
  const int prev = num_threads();
  set_num_threads(1);
  auto serial = run_all();
  set_num_threads(2);
  auto threaded = run_all();
  set_num_threads(prev);
  set_num_threads(1);
  Tensor y1 = linear(x, w, b.narrow(0, 0, 64));
  set_num_threads(2);
  Tensor y2 = linear(x, w, b.narrow(0, 0, 64));
  set_num_threads(prev);
  CHECK_CLOSE(y2, y1, 1e-4, 1e-5);
  for (size_t i = 0; i < serial.size(); ++i) {
    INFO("op " << i);
    CHECK_CLOSE(threaded[i], serial[i], 0.0, 0.0);
  }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
