// The runner of test_dist: Catch2 inside one dist::InitGuard, run by ctest under
// `mpirun -np 2` (tests/dist/CMakeLists.txt). Every rank runs every test case in the same order,
// so the collectives inside them match up.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "nabla/nn/distributed/dist.h"

#if defined(__SANITIZE_ADDRESS__)
// Under ASan: OpenMPI unloads its plugins (mca_*.so) at MPI_Finalize, and the allocations they
// leave to the process's exit then show unnamed frames that tests/lsan.supp cannot match. This
// dlclose, which the dynamic linker prefers to libc's, keeps every plugin loaded.
extern "C" int dlclose(void*) { return 0; }
#endif

int main(int argc, char** argv) {
  nabla::dist::InitGuard mpi(&argc, &argv);
  return Catch::Session().run(argc, argv);
}
