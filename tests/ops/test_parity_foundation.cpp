// Forward and backward of the foundation ops against PyTorch (fixtures from
// tests/fixtures/gen_foundation.py). Each case applies the same op as the script.
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::check_parity;

namespace {
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
Fn binary(Tensor (*f)(const Tensor&, const Tensor&)) {
  return [f](const std::vector<Tensor>& x) { return f(x[0], x[1]); };
}
Fn unary(Tensor (*f)(const Tensor&)) {
  return [f](const std::vector<Tensor>& x) { return f(x[0]); };
}
}  // namespace

TEST_CASE("parity: arithmetic", "[ops][parity]") {
  for (auto [op, f] : std::vector<std::pair<std::string, Tensor (*)(const Tensor&, const Tensor&)>>{
           {"add", add}, {"sub", sub}, {"mul", mul}, {"div", div}})
    for (std::string variant : {"_same", "_broadcast", "_scalar0d"})
      check_parity("foundation", op + variant, binary(f));
  check_parity("foundation", "pow_tensor", [](auto& x) { return pow(x[0], x[1]); });
  check_parity("foundation", "pow_scalar", [](auto& x) { return pow(x[0], 2.5); });
  check_parity("foundation", "neg", unary(neg));
}

TEST_CASE("parity: unary math", "[ops][parity]") {
  for (auto [op, f] : std::vector<std::pair<std::string, Tensor (*)(const Tensor&)>>{
           {"exp", exp}, {"tanh", tanh}, {"sigmoid", sigmoid}, {"relu", relu}, {"abs", abs}}) {
    check_parity("foundation", op, unary(f));
    check_parity("foundation", op + "_t", [f](auto& x) { return f(x[0].t()); });
  }
  check_parity("foundation", "log", unary(log));
  check_parity("foundation", "sqrt", unary(sqrt));
}

TEST_CASE("parity: reductions", "[ops][parity]") {
  check_parity("foundation", "sum_all", [](auto& x) { return sum(x[0]); });
  check_parity("foundation", "sum_dims", [](auto& x) { return sum(x[0], {0, 2}); });
  check_parity("foundation", "sum_keepdim", [](auto& x) { return sum(x[0], {1}, true); });
  check_parity("foundation", "mean_all", [](auto& x) { return mean(x[0]); });
  check_parity("foundation", "mean_dim", [](auto& x) { return mean(x[0], {-1}); });
}

TEST_CASE("parity: matmul", "[ops][parity]") {
  for (std::string c : {"matmul_dot", "matmul_mv", "matmul_vm", "matmul_mm", "matmul_batched"})
    check_parity("foundation", c, binary(matmul));
  check_parity("foundation", "matmul_transposed",
               [](auto& x) { return matmul(x[0].t(), x[1].transpose(0, 1)); });
}

TEST_CASE("parity: views", "[ops][parity]") {
  check_parity("foundation", "view_ops", [](auto& x) {
    Tensor t = mul(x[0].transpose(0, 2).reshape({4, 6}).slice(0, 1, 3), 2.0);
    return t.unsqueeze(0).expand({2, 2, 6}).permute({2, 0, 1}).select(1, 1).narrow(0, 1, 4);
  });
  check_parity("foundation", "slice_step",
               [](auto& x) { return mul(x[0].slice(1, 0, 6, 2), x[0].slice(1, 1, 6, 2)); });
}

}  // namespace NABLA_UNITY_ID
}  // namespace
