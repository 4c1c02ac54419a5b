// BatchNorm1d/2d, GroupNorm, RMSNorm modules: PyTorch's running statistics after several training
// steps and the eval output afterwards (tests/fixtures/gen_norms.py), parameter and buffer names,
// buffers through state_dict, safetensors and io::Checkpoint, module gradcheck, errors.
#include <unistd.h>

#include <filesystem>

#include "nabla/core/io/checkpoint.h"
#include "tests/nn/module_gradcheck.h"
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

// The exception's type and its message.
#define CHECK_ERROR(expr, type, matcher) \
  do {                                   \
    CHECK_THROWS_AS(expr, type);         \
    CHECK_THROWS_WITH(expr, matcher);    \
  } while (0)
using test::leaf;

namespace {

const io::SafetensorsFile& fx() { return test::fixture("norms"); }

std::vector<std::string> keys(const nn::StateDict& d) {
  std::vector<std::string> k;
  for (const auto& [name, t] : d) k.push_back(name);
  return k;
}

// Loads <name>.state, runs the three training steps and one eval step, compares every output,
// the final buffers and the eval output with PyTorch's.
void check_batchnorm_run(const std::string& name, nn::BatchNormBase& m, DType dt) {
  const std::string sfx = dt == kFloat64 ? "" : "_f32";
  const double atol = dt == kFloat64 ? 1e-10 : 1e-5, rtol = dt == kFloat64 ? 1e-10 : 1e-4;
  INFO(name << " " << dtype_name(dt));
  nn::StateDict state;
  for (const auto& [key, t] : fx().tensors)
    if (key.rfind(name + ".state.", 0) == 0) state.emplace_back(key.substr(name.size() + 7), t);
  REQUIRE(state.size() == 5);
  m.load_state_dict(state);
  m.train();
  for (int k = 0; k < 3; ++k) {
    INFO("training step " << k);
    Tensor y = m(fx().at(name + ".x" + std::to_string(k)).to(dt));
    CHECK_CLOSE(y, fx().at(name + ".out" + std::to_string(k) + sfx), atol, rtol);
  }
  CHECK_CLOSE(m.running_mean(), fx().at(name + ".final.running_mean" + sfx), atol, rtol);
  CHECK_CLOSE(m.running_var(), fx().at(name + ".final.running_var" + sfx), atol, rtol);
  CHECK(m.num_batches_tracked().item<int64_t>() ==
        fx().at(name + ".final.num_batches_tracked" + sfx).item<int64_t>());
  m.eval();
  CHECK_CLOSE(m(fx().at(name + ".eval_x").to(dt)), fx().at(name + ".eval_out" + sfx), atol, rtol);
}

}  // namespace

TEST_CASE("parity: BatchNorm running statistics over training steps, then eval",
          "[nn][parity][norms]") {
  for (DType dt : {kFloat64, kFloat32}) {
    nn::BatchNorm1d a(3, {.dtype = dt});
    check_batchnorm_run("bn1d_2d", a, dt);
    nn::BatchNorm1d b(3, {.momentum = 0.3, .dtype = dt});
    check_batchnorm_run("bn1d_3d", b, dt);
    nn::BatchNorm2d c(2, {.eps = 1e-3, .dtype = dt});
    check_batchnorm_run("bn2d", c, dt);
    nn::BatchNorm2d d(2, {.momentum = std::nullopt, .dtype = dt});
    check_batchnorm_run("bn2d_cumulative", d, dt);
  }
}

TEST_CASE("norm modules: PyTorch's names, init and options", "[nn][norms]") {
  nn::BatchNorm2d bn(4);
  CHECK(keys(bn.state_dict()) == std::vector<std::string>{"weight", "bias", "running_mean",
                                                          "running_var", "num_batches_tracked"});
  CHECK(bn.parameters().size() == 2);
  CHECK(bn.num_batches_tracked().dtype() == kInt64);
  CHECK(bn.num_batches_tracked().dim() == 0);
  CHECK_CLOSE(bn.running_var(), ones({4}), 0.0, 0.0);
  nn::BatchNorm1d plain(3, {.affine = false, .track_running_stats = false});
  CHECK(plain.state_dict().empty());
  // Without running statistics, eval still normalises with the batch's.
  plain.eval();
  Tensor x = leaf({5, 3}, 1).detach();
  CHECK_CLOSE(plain(x), batch_norm(x, Tensor(), Tensor(), {}, {}, true), 1e-12, 0.0);
  nn::GroupNorm gn(2, 6);
  CHECK(keys(gn.state_dict()) == std::vector<std::string>{"weight", "bias"});
  nn::RMSNorm rms(Shape{4});
  CHECK(keys(rms.state_dict()) == std::vector<std::string>{"weight"});
  Tensor r = leaf({2, 4}, 2).detach().to(kFloat32);
  CHECK_CLOSE(rms(r), rms_norm(r, {4}), 0.0, 0.0);
  // reset_running_stats
  Tensor xb = leaf({4, 4, 2, 2}, 3).detach().to(kFloat32);
  bn(xb);
  CHECK(bn.num_batches_tracked().item<int64_t>() == 1);
  bn.reset_running_stats();
  CHECK(bn.num_batches_tracked().item<int64_t>() == 0);
  CHECK_CLOSE(bn.running_mean(), zeros({4}), 0.0, 0.0);
}

TEST_CASE("BatchNorm buffers travel through state_dict, safetensors and checkpoints",
          "[nn][norms][io]") {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("nabla_bn_rt_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  nn::BatchNorm2d a(3);
  for (int k = 0; k < 3; ++k) a(add(mul(leaf({2, 3, 2, 2}, k).detach().to(kFloat32), 2.0), 1.0));
  REQUIRE(a.num_batches_tracked().item<int64_t>() == 3);
  io::save_safetensors(path, a.state_dict());
  nn::BatchNorm2d b(3);
  b.load_state_dict(io::load_safetensors(path).tensors);
  io::Checkpoint ck;
  ck.put_section("model", a.state_dict());
  ck.save(path);
  nn::BatchNorm2d c(3);
  c.load_state_dict(io::Checkpoint::load(path).section("model"));
  std::filesystem::remove(path);
  for (auto* m : {&b, &c}) {
    CHECK_CLOSE(m->running_mean(), a.running_mean(), 0.0, 0.0);
    CHECK_CLOSE(m->running_var(), a.running_var(), 0.0, 0.0);
    CHECK(m->num_batches_tracked().item<int64_t>() == 3);
    CHECK(m->num_batches_tracked().dtype() == kInt64);
  }
  // The loaded module evaluates exactly as the trained one.
  a.eval();
  c.eval();
  Tensor x = leaf({2, 3, 2, 2}, 9).detach().to(kFloat32);
  CHECK_CLOSE(c(x), a(x), 0.0, 0.0);
  // A missing buffer is a load error, as any missing key.
  nn::StateDict partial = a.state_dict();
  partial.pop_back();
  CHECK_ERROR(c.load_state_dict(partial), ValueError, Contains("num_batches_tracked"));
}

TEST_CASE("norm modules pass gradcheck", "[nn][norms]") {
  nn::BatchNorm1d bn1(3, {.dtype = kFloat64});
  Tensor x3 = leaf({2, 3, 4}, 1);
  CHECK_MODULE_GRADCHECK(bn1, std::vector<Tensor>{x3}, [&](auto& in) { return bn1(in[0]); });
  bn1.eval();
  CHECK_MODULE_GRADCHECK(bn1, std::vector<Tensor>{x3}, [&](auto& in) { return bn1(in[0]); });
  nn::BatchNorm2d bn2(2, {.dtype = kFloat64});
  Tensor x4 = leaf({3, 2, 1, 1}, 2);  // size-1 spatial
  CHECK_MODULE_GRADCHECK(bn2, std::vector<Tensor>{x4}, [&](auto& in) { return bn2(in[0]); });
  nn::GroupNorm gn(2, 4, {.dtype = kFloat64});
  CHECK_MODULE_GRADCHECK(gn, std::vector<Tensor>{leaf({2, 4, 3}, 3)},
                         [&](auto& in) { return gn(in[0]); });
  nn::RMSNorm rms(Shape{3}, {.eps = 1e-6, .dtype = kFloat64});
  CHECK_MODULE_GRADGRADCHECK(rms, std::vector<Tensor>{leaf({2, 3}, 4)},
                             [&](auto& in) { return rms(in[0]); });
}

TEST_CASE("norm modules reject bad input as PyTorch does", "[nn][norms]") {
  nn::BatchNorm1d bn1(3);
  // A batch of one (N, C) in training: one value per channel.
  CHECK_ERROR(bn1(ones({1, 3})), ValueError,
              Contains("BatchNorm1d") && Contains("more than 1 value per channel"));
  CHECK(bn1.num_batches_tracked().item<int64_t>() == 0);  // a failed call changes nothing
  bn1.eval();
  CHECK(bn1(ones({1, 3})).shape() == Shape{1, 3});  // fine in eval
  CHECK_ERROR(bn1(ones({2, 4})), ShapeError, Contains("4 channels") && Contains("num_features 3"));
  CHECK_ERROR(bn1(ones({2, 3, 2, 2})), ShapeError, Contains("2D (N, C) or 3D"));
  nn::BatchNorm2d bn2(3);
  CHECK_ERROR(bn2(ones({2, 3, 4})), ShapeError, Contains("4D") && Contains("(2, 3, 4)"));
  CHECK_ERROR(nn::GroupNorm(4, 6), ValueError, Contains("divisible by num_groups"));
  nn::GroupNorm gn(2, 6);
  CHECK_ERROR(gn(ones({2, 4, 3})), ShapeError, Contains("num_channels = 6"));
  nn::RMSNorm rms(Shape{4});
  CHECK_ERROR(rms(ones({2, 5})), ShapeError, Contains("rms_norm"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
#undef CHECK_ERROR
