// bfloat16 / float16 against PyTorch and on disk: torch's conversions of a few thousand values,
// safetensors BF16/F16 round trips, and a PyTorch-written nn.TransformerEncoderLayer checkpoint
// in BF16 and F16 (tests/fixtures/gen_half.py) loaded into the nabla twin.
#include <unistd.h>

#include <filesystem>

#include "nabla/core/io/safetensors.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;
using test::bit_equal;

namespace {

const io::SafetensorsFile& half_fixture() {
  static const io::SafetensorsFile f =
      io::load_safetensors(std::string(NABLA_FIXTURE_DIR) + "/half.safetensors");
  return f;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("nabla_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// The fixture's state dict under `prefix.` (bf16 or f16), keys without the prefix.
nn::StateDict fixture_state(const std::string& prefix) {
  nn::StateDict out;
  for (const auto& [name, t] : half_fixture().tensors)
    if (name.starts_with(prefix + ".")) out.emplace_back(name.substr(prefix.size() + 1), t);
  return out;
}

}  // namespace

TEST_CASE("half: conversions match PyTorch's on its own table", "[core][half][parity]") {
  const auto& f = half_fixture();
  const std::vector<float> x = f.at("conv.f32").to_vector<float>();
  REQUIRE(x.size() > 5000);
  const Tensor torch_bf16 = f.at("conv.bf16"), torch_f16 = f.at("conv.f16");
  REQUIRE(torch_bf16.dtype() == kBFloat16);
  REQUIRE(torch_f16.dtype() == kFloat16);
  const std::vector<bfloat16> tb = torch_bf16.to_vector<bfloat16>();
  const std::vector<float16> th = torch_f16.to_vector<float16>();
  int64_t bad_bf16 = 0, bad_f16 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    bad_bf16 += bfloat16(x[i]).bits != tb[i].bits;
    bad_f16 += float16(x[i]).bits != th[i].bits;
  }
  CHECK(bad_bf16 == 0);
  CHECK(bad_f16 == 0);
  // The tensor path (to()) gives the same bits as the scalar one.
  CHECK(bit_equal(f.at("conv.f32").to(kBFloat16), torch_bf16));
  CHECK(bit_equal(f.at("conv.f32").to(kFloat16), torch_f16));
}

TEST_CASE("half: safetensors BF16/F16 round trip is bit-exact", "[core][half][io]") {
  Generator g(5);
  // NaN payloads, -0, Inf and subnormals included: the file stores the bits.
  const std::vector<bfloat16> odd_bf16 = {bfloat16::from_bits(0x7fc1), bfloat16::from_bits(0xff81),
                                          bfloat16::from_bits(0x8000), bfloat16::from_bits(0x0001),
                                          bfloat16::from_bits(0x7f80)};
  const std::vector<float16> odd_f16 = {float16::from_bits(0x7e01), float16::from_bits(0x0001),
                                        float16::from_bits(0xfc00), float16::from_bits(0x8000)};
  io::NamedTensors in = {
      {"bf16", randn({3, 4}, g).to(kBFloat16)},    {"f16", randn({2, 5}, g).to(kFloat16)},
      {"bf16_odd", from_vector(odd_bf16, {5})},    {"f16_odd", from_vector(odd_f16, {2, 2})},
      {"view", randn({4, 3}, g).to(kFloat16).t()}, {"empty", zeros({0, 2}, kBFloat16)},
  };
  const std::string path = temp_path("half.safetensors");
  io::save_safetensors(path, in);
  io::SafetensorsFile f = io::load_safetensors(path);
  for (const auto& [name, t] : in) {
    INFO(name);
    CHECK(f.at(name).dtype() == t.dtype());
    CHECK(bit_equal(f.at(name), t));
  }
  // The header names the codes the format defines.
  const std::string bytes = io::read_file(path);
  CHECK_THAT(bytes, Contains("\"BF16\"") && Contains("\"F16\""));
  std::filesystem::remove(path);
}

TEST_CASE("half: a PyTorch BF16/F16 TransformerEncoderLayer loads into the nabla twin",
          "[core][half][parity]") {
  const auto& f = half_fixture();
  for (const std::string prefix : {"bf16", "f16"}) {
    INFO(prefix);
    const DType dt = prefix == "bf16" ? kBFloat16 : kFloat16;
    nn::StateDict state = fixture_state(prefix);
    REQUIRE(state.size() == 12);
    for (const auto& [name, t] : state) CHECK(t.dtype() == dt);

    // Into a float32 module: each weight widens exactly (the documented rule), and the output is
    // PyTorch's float32 layer with the same rounded weights.
    nn::TransformerEncoderLayer layer(8, 2, 16, 0.0);
    layer.eval();
    layer.load_state_dict(state);
    for (const auto& [name, t] : layer.state_dict()) {
      INFO(name);
      CHECK(t.dtype() == kFloat32);
      for (const auto& [key, given] : state)
        if (key == name) CHECK(bit_equal(t, given.to(kFloat32)));
    }
    NoGradGuard no_grad;
    CHECK_CLOSE(layer(f.at("x")), f.at("out_" + prefix), 2e-6, 2e-6);

    // Into a module converted to the file's dtype: the weights are the file's bits.
    nn::TransformerEncoderLayer low(8, 2, 16, 0.0);
    low.to(dt);
    low.load_state_dict(state);
    for (const auto& [name, t] : low.state_dict()) {
      INFO(name);
      for (const auto& [key, given] : state)
        if (key == name) CHECK(bit_equal(t, given));
    }
  }
}

TEST_CASE("half: loading converts floating dtypes and refuses a float for an int tensor",
          "[core][half]") {
  nn::Linear lin(3, 2);
  // float32 -> bfloat16 module: rounds to nearest even, once.
  Tensor w32 = tensor({{0.1, 0.2, 0.3}, {1.0, 1.0 / 3, -7.0}});
  nn::Linear low(3, 2);
  low.to(kBFloat16);
  low.load_state_dict({{"weight", w32}, {"bias", tensor({0.5, -0.1})}});
  CHECK(bit_equal(low.state_dict()[0].second, w32.to(kBFloat16)));
  // A non-floating tensor for a floating parameter would truncate silently: an error that names
  // the key and both dtypes, and the module is unchanged.
  const Tensor before = lin.state_dict()[0].second.clone();
  CHECK_THROWS_WITH(
      lin.load_state_dict({{"weight", zeros({2, 3}, kInt64)}, {"bias", zeros({2}, kBFloat16)}}),
      Contains("weight: checkpoint int64 vs model float32") && Contains("dtype mismatch"));
  CHECK(bit_equal(lin.state_dict()[0].second, before));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
