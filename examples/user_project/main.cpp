// Write your own model: a small classifier trained on a few lines of data.
#include <fmt/format.h>
#include <nabla/nabla.h>

using namespace nabla;

int main() {
  // Points (x, y) labelled by the quadrant sign of x * y: not linearly separable.
  Tensor x = tensor(
      {{1, 2}, {-1, 2}, {-2, -1}, {2, -1}, {0.5, 0.3}, {-0.4, 0.6}, {-0.5, -0.2}, {0.3, -0.8}});
  Tensor y = from_vector<int64_t>({0, 1, 0, 1, 0, 1, 0, 1}, {8});

  manual_seed(0);
  nn::Sequential model(std::make_shared<nn::Linear>(2, 16), std::make_shared<nn::Tanh>(),
                       std::make_shared<nn::Linear>(16, 2));
  optim::Adam opt(model.parameters(), {.lr = 0.05});

  for (int step = 1; step <= 200; ++step) {
    Tensor loss = cross_entropy(model(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (step % 50 == 0) fmt::print("step {:3d}  loss {:.4f}\n", step, loss.item());
  }
  NoGradGuard no_grad;
  double accuracy = mean(eq(argmax(model(x), -1), y).to(kFloat32)).item();
  fmt::print("RESULT example=user_project accuracy={:.3f}\n", accuracy);
  return accuracy == 1.0 ? 0 : 1;
}
