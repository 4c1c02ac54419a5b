// nabla::dist collectives on every dtype, between the ranks mpirun started (also correct, if
// trivial, with one). Values are small integers, exact in every dtype, so results are compared
// exactly.
#include <catch2/catch.hpp>

#include "nabla/nabla.h"
#include "nabla/nn/distributed/dist.h"

namespace {

using namespace nabla;
namespace dist = nabla::dist;

const DType kAllDTypes[] = {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kBool};

// Element i of rank r's tensor: (r + 1) * (i + 1) (+ 2^40 for int64, beyond float's exact range).
Tensor rank_values(int r, int64_t n, DType dt) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(double(r + 1) * double(i + 1));
  if (dt == kInt64) {
    std::vector<int64_t> iv;
    for (double x : v) iv.push_back(static_cast<int64_t>(x) + (int64_t{1} << 40));
    return from_vector(iv, {n});
  }
  if (dt == kBool) {
    std::vector<bool> bv;
    for (int64_t i = 0; i < n; ++i) bv.push_back((i + r) % 3 == 0);
    return from_vector(std::vector<double>(bv.begin(), bv.end()), {n}).to(kBool);
  }
  return from_vector(v, {n}).to(dt);
}

// The sum over ranks of rank_values, computed here in float64 (int64 exactly, bool as or).
std::vector<double> expected_sum(int64_t n, DType dt) {
  std::vector<double> out(static_cast<size_t>(n), 0.0);
  const int w = dist::world_size();
  for (int r = 0; r < w; ++r) {
    std::vector<double> v = rank_values(r, n, dt).to(kFloat64).to_vector<double>();
    for (int64_t i = 0; i < n; ++i) {
      if (dt == kBool)
        out[i] = (out[i] != 0 || v[i] != 0) ? 1 : 0;
      else if (dt != kInt64)
        out[i] += v[i];
    }
  }
  if (dt == kInt64) {  // summed as int64: doubles would round w * 2^40 + small
    for (int64_t i = 0; i < n; ++i) {
      int64_t s = 0;
      for (int r = 0; r < w; ++r) s += rank_values(r, n, dt).to_vector<int64_t>()[i];
      out[i] = static_cast<double>(s - w * (int64_t{1} << 40));
    }
  }
  return out;
}

std::vector<double> as_doubles(const Tensor& t, DType dt) {
  if (dt == kInt64) {
    std::vector<double> out;
    for (int64_t x : t.to_vector<int64_t>())
      out.push_back(static_cast<double>(x - dist::world_size() * (int64_t{1} << 40)));
    return out;
  }
  return t.to(kFloat64).to_vector<double>();
}

}  // namespace

TEST_CASE("dist: rank and world size come from mpirun", "[collectives]") {
  REQUIRE(dist::initialized());
  CHECK(dist::world_size() >= 1);
  CHECK(dist::rank() >= 0);
  CHECK(dist::rank() < dist::world_size());
  CHECK(dist::timeout_seconds() > 0);
  const double before = dist::timeout_seconds();
  CHECK_THROWS_AS(dist::set_timeout_seconds(0), ValueError);
  CHECK_THROWS_AS(dist::set_timeout_seconds(-1), ValueError);
  dist::set_timeout_seconds(42);
  CHECK(dist::timeout_seconds() == 42);
  dist::set_timeout_seconds(before);
  dist::InitGuard* second = nullptr;
  CHECK_THROWS_WITH(second = new dist::InitGuard(), Catch::Contains("already initialized"));
  CHECK(second == nullptr);
}

TEST_CASE("dist: all_reduce sums every dtype, in place and as a copy", "[collectives]") {
  for (DType dt : kAllDTypes) {
    for (bool rank_order : {false, true}) {
      INFO(dtype_name(dt) << (rank_order ? " rank order" : " mpi"));
      Tensor t = rank_values(dist::rank(), 6, dt).view({2, 3});
      Tensor copy = dist::all_reduce(t, dist::ReduceOp::Sum, rank_order);
      dist::all_reduce_(t, dist::ReduceOp::Sum, rank_order);
      CHECK(t.dtype() == dt);
      CHECK(t.shape() == Shape{2, 3});
      CHECK(as_doubles(t.flatten(), dt) == expected_sum(6, dt));
      CHECK(as_doubles(copy.flatten(), dt) == expected_sum(6, dt));
    }
  }
}

TEST_CASE("dist: all_reduce mean of floating dtypes; integers are refused", "[collectives]") {
  const double w = dist::world_size();
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    for (bool rank_order : {false, true}) {
      INFO(dtype_name(dt));
      Tensor t = rank_values(dist::rank(), 4, dt);
      dist::all_reduce_(t, dist::ReduceOp::Mean, rank_order);
      std::vector<double> want = expected_sum(4, dt);
      for (double& x : want) x = Tensor(scalar_tensor(x / w, dt)).item();  // rounded to dt
      CHECK(t.to(kFloat64).to_vector<double>() == want);
    }
  }
  for (DType dt : {kInt64, kBool}) {
    Tensor t = rank_values(dist::rank(), 4, dt);
    CHECK_THROWS_AS(dist::all_reduce_(t, dist::ReduceOp::Mean), DTypeError);
    CHECK_THROWS_WITH(dist::all_reduce_(t, dist::ReduceOp::Mean),
                      Catch::Contains("all_reduce") && Catch::Contains(dtype_name(dt)));
  }
}

TEST_CASE("dist: all_reduce of a non-contiguous view writes through it", "[collectives]") {
  Tensor base = rank_values(dist::rank(), 6, kFloat32).view({2, 3});
  Tensor view = base.t();  // (3, 2), strides (1, 3)
  REQUIRE_FALSE(view.is_contiguous());
  dist::all_reduce_(view, dist::ReduceOp::Sum);
  CHECK(base.flatten().to(kFloat64).to_vector<double>() == expected_sum(6, kFloat32));
}

TEST_CASE("dist: all_reduce_async completes at wait()", "[collectives]") {
  for (DType dt : {kFloat32, kBFloat16, kInt64}) {
    Tensor t = rank_values(dist::rank(), 5, dt);
    dist::Work work = dist::all_reduce_async(t, dist::ReduceOp::Sum);
    CHECK_FALSE(work.done());
    work.wait();
    CHECK(work.done());
    CHECK(work.test());
    CHECK(as_doubles(t, dt) == expected_sum(5, dt));
  }
  dist::Work none;
  CHECK(none.done());
  none.wait();  // nothing started: returns
}

TEST_CASE("dist: broadcast from any root, every dtype", "[collectives]") {
  const int root = dist::world_size() - 1;
  for (DType dt : kAllDTypes) {
    INFO(dtype_name(dt));
    Tensor t = rank_values(dist::rank(), 4, dt);
    const Tensor want = rank_values(root, 4, dt);
    dist::broadcast_(t, root);
    CHECK(t.to(kFloat64).to_vector<double>() == want.to(kFloat64).to_vector<double>());
  }
  Tensor base = rank_values(dist::rank(), 6, kFloat64).view({2, 3});
  Tensor view = base.t();
  dist::broadcast_(view, 0);
  CHECK(base.to_vector<double>() == rank_values(0, 6, kFloat64).to_vector<double>());
  Tensor t = zeros({2});
  CHECK_THROWS_AS(dist::broadcast_(t, dist::world_size()), IndexError);
}

TEST_CASE("dist: all_gather stacks every rank's tensor in rank order", "[collectives]") {
  const int w = dist::world_size();
  for (DType dt : kAllDTypes) {
    INFO(dtype_name(dt));
    Tensor t = rank_values(dist::rank(), 6, dt).view({3, 2}).t();  // non-contiguous (2, 3)
    Tensor all = dist::all_gather(t);
    REQUIRE(all.shape() == Shape{w, 2, 3});
    CHECK(all.dtype() == dt);
    for (int r = 0; r < w; ++r)
      CHECK(all.select(0, r).contiguous().to(kFloat64).to_vector<double>() ==
            rank_values(r, 6, dt).view({3, 2}).t().contiguous().to(kFloat64).to_vector<double>());
  }
  dist::barrier();
}

TEST_CASE("dist: ranks that pass different shapes or dtypes get an error naming both",
          "[collectives]") {
  if (dist::world_size() < 2) return;
  const bool one = dist::rank() == 1;
  Tensor t = one ? zeros({2, 4}) : zeros({2, 3});
  CHECK_THROWS_WITH(dist::all_reduce_(t), Catch::Contains("all_reduce") &&
                                              Catch::Contains("ranks disagree") &&
                                              Catch::Contains("rank 0 has float32 (2, 3) (sum)") &&
                                              Catch::Contains("rank 1 has float32 (2, 4) (sum)"));
  Tensor d = one ? zeros({3}, kFloat64) : zeros({3}, kFloat32);
  CHECK_THROWS_WITH(dist::broadcast_(d, 0),
                    Catch::Contains("broadcast") &&
                        Catch::Contains("rank 0 has float32 (3,) (root 0)") &&
                        Catch::Contains("rank 1 has float64 (3,) (root 0)"));
  CHECK_THROWS_AS(dist::all_gather(t), dist::DistError);
  // The check is a clean refusal: the next collective works.
  Tensor ok = ones({2});
  dist::all_reduce_(ok);
  CHECK(ok.to_vector<float>() == std::vector<float>(2, float(dist::world_size())));
}
