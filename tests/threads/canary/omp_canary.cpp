// Proves that scripts/tsan.sh's setup sees OpenMP code correctly, before its report count is
// trusted: `omp_canary` (threads that meet at a barrier) must give no report, and
// `omp_canary race` (an unsynchronised update) must give one. Without Archer, ThreadSanitizer
// cannot see libomp's barriers and reports the first case too (checked when this was written:
// OMP_TOOL=disabled gives a report at the partial sums).
//
// The planted race is two writes a few milliseconds apart, not simultaneous: TSan can miss
// truly simultaneous accesses (their shadow updates race too), and CI once saw `shared 1`
// with no report when both threads incremented at once.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const bool racy = argc > 1 && std::strcmp(argv[1], "race") == 0;
  std::vector<double> data(1 << 16, 1.0), partial(2, 0.0);
  long shared = 0;
#pragma omp parallel num_threads(2)
  {
    const int t = omp_get_thread_num();
    for (size_t i = static_cast<size_t>(t); i < data.size(); i += 2) partial[t] += data[i];
#pragma omp barrier
    if (t == 0) data[0] = partial[0] + partial[1];  // ordered by the barrier
    if (racy && t == 1) shared = 1;  // not ordered with thread 0's write below: a data race
    if (racy && t == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      shared += 1;
    }
  }
  std::printf("sum %g, shared %ld\n", data[0], shared);
}
