#include "core/parallel.h"

#include <cblas.h>
#include <fmt/format.h>

namespace nabla {

int num_threads() { return omp_get_max_threads(); }

void set_num_threads(int n) {
  if (n < 1) n = 1;
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

std::string runtime_info() {
  const char* parallel = "unknown";
  switch (openblas_get_parallel()) {
    case 0:
      parallel = "sequential";
      break;
    case 1:
      parallel = "pthreads";
      break;
    case 2:
      parallel = "openmp";
      break;
  }
  return fmt::format("nabla: {} threads (OpenMP); OpenBLAS {} [{}], core {}, {} threads",
                     num_threads(), openblas_get_config(), parallel, openblas_get_corename(),
                     openblas_get_num_threads());
}

}  // namespace nabla
