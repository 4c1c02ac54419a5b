// The switch between tuned and reference kernels (ops/kernels/kernels.h): it follows
// NABLA_KERNELS (ctest runs the ops, nn and optim suites a second time with
// NABLA_KERNELS=reference, the tests named "reference:..."), and TunedKernelsGuard restores it.
#include <cstdlib>
#include <string_view>

#include "nabla/ops/kernels/kernels.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

TEST_CASE("kernels: NABLA_KERNELS=reference switches the tuned kernels off", "[ops]") {
  const char* env = std::getenv("NABLA_KERNELS");
  const bool reference_run = env != nullptr && std::string_view(env) == "reference";
  // tests/CMakeLists.txt names the reference run: its environment must have reached the test.
  if (Catch::getCurrentContext().getConfig()->name() == "reference-kernels") CHECK(reference_run);
  CHECK(kernels::tuned_enabled() == !reference_run);
  {
    kernels::TunedKernelsGuard flip(reference_run);
    CHECK(kernels::tuned_enabled() == reference_run);
    {
      kernels::TunedKernelsGuard back(!reference_run);
      CHECK(kernels::tuned_enabled() == !reference_run);
    }
    CHECK(kernels::tuned_enabled() == reference_run);
  }
  CHECK(kernels::tuned_enabled() == !reference_run);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
