// The runner of test_dist: Catch2 inside one dist::InitGuard, run by ctest under
// `mpirun -np 2` (tests/dist/CMakeLists.txt). Every rank runs every test case in the same order,
// so the collectives inside them match up.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "nabla/nn/distributed/dist.h"

int main(int argc, char** argv) {
  nabla::dist::InitGuard mpi(&argc, &argv);
  return Catch::Session().run(argc, argv);
}
