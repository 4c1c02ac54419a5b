// A data-parallel training loop whose rank 1 stops responding (`stop`: SIGSTOP, a hung peer) or
// dies (`kill`: SIGKILL) at step 3; tests/dist/fault.sh checks that rank 0 then exits non-zero
// with a message naming the failed collective, within NABLA_DIST_TIMEOUT, instead of hanging.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>

#include "nabla/nabla.h"
#include "nabla/nn/distributed/data_parallel.h"

using namespace nabla;

int main(int argc, char** argv) {
  if (argc != 2 || (std::strcmp(argv[1], "stop") != 0 && std::strcmp(argv[1], "kill") != 0)) {
    std::fprintf(stderr, "usage: dist_fault_peer stop|kill\n");
    return 2;
  }
  const int signal = std::strcmp(argv[1], "stop") == 0 ? SIGSTOP : SIGKILL;
  dist::InitGuard mpi(&argc, &argv);
  try {
    manual_seed(1);
    auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 8),
                                                  std::make_shared<nn::Tanh>(),
                                                  std::make_shared<nn::Linear>(8, 1));
    // Start-up under a generous deadline (on a loaded machine one rank may start seconds after
    // the other); the short one from NABLA_DIST_TIMEOUT applies to the training steps.
    const double step_timeout = dist::timeout_seconds();
    dist::set_timeout_seconds(120);
    dist::DistributedDataParallel ddp(model);
    dist::barrier();
    dist::set_timeout_seconds(step_timeout);
    optim::SGD sgd(model->parameters(), optim::SGDOptions{.lr = 0.1});
    for (int step = 0; step < 1000; ++step) {
      if (step == 3 && dist::rank() == 1) std::raise(signal);
      Tensor x = randn({8, 4});
      sgd.zero_grad();
      ddp.backward(mean(mul((*model)(x), (*model)(x))));
      sgd.step();
      std::printf("rank %d step %d\n", dist::rank(), step);
      std::fflush(stdout);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", dist::rank(), e.what());
    return 1;  // the InitGuard sees the failed collective and calls MPI_Abort
  }
  return 0;
}
