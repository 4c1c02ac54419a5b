// Data-parallel steps of a small model through the installed nabla::nabla_dist: every rank must
// end with the same parameters although each trains on its own data.
#include <cstdio>
#include <memory>

#include <nabla/nabla.h>
#include <nabla/nn/distributed/data_parallel.h>

#ifndef NABLA_HAS_DIST
#error "nabla::nabla_dist defines NABLA_HAS_DIST for its users"
#endif

using namespace nabla;

int main(int argc, char** argv) {
  dist::InitGuard mpi(&argc, &argv);
  manual_seed(static_cast<uint64_t>(1 + dist::rank()));  // different weights: DDP copies rank 0's
  auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 8),
                                                std::make_shared<nn::Tanh>(),
                                                std::make_shared<nn::Linear>(8, 1));
  dist::DistributedDataParallel ddp(model);
  optim::SGD sgd(model->parameters(), optim::SGDOptions{.lr = 0.1});
  for (int step = 0; step < 3; ++step) {
    Tensor x = randn({8, 4});  // each rank's own batch
    sgd.zero_grad();
    ddp.backward(mean(mul((*model)(x), (*model)(x))));
    sgd.step();
  }
  bool same = true;
  for (const Tensor& p : model->parameters()) {
    Tensor all = dist::all_gather(p.detach());
    for (int r = 1; r < dist::world_size(); ++r)
      same = same && all.select(0, r).to_vector<float>() == all.select(0, 0).to_vector<float>();
  }
  if (dist::rank() == 0)
    std::printf("RESULT example=dist_project world=%d %s\n", dist::world_size(),
                same ? "ok" : "parameters differ");
  return same ? 0 : 1;
}
