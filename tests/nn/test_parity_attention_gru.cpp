// PyTorch parity for modules with parameters: torch.nn.GRU, d2l's AdditiveAttention and
// DotProductAttention, and d2l's Bahdanau seq2seq. tests/fixtures/gen_attention_gru.py stores
// each module's parameters under PyTorch's names; we load them by name (a missing or misnamed
// parameter fails the test), run the same inputs in float64 and float32, and compare every output
// and the gradients of every parameter and floating input (tolerances of tests/parity.h).
#include "tests/parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using test::ParityTolerance;

namespace {

using ModuleFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

void check_module_parity(const std::string& name, nn::Module& m, const ModuleFn& fn) {
  const io::SafetensorsFile& f = test::fixture("attention_gru");
  INFO("module parity case " << name);
  nn::StateDict params;
  for (const auto& [pname, p] : m.named_parameters())
    params.emplace_back(pname, f.at(name + ".param." + pname));
  size_t stored = 0;  // the fixture has no parameter the module lacks
  for (const auto& [key, t] : f.tensors)
    if (key.rfind(name + ".param.", 0) == 0) ++stored;
  CHECK(stored == params.size());
  std::vector<Tensor> raw, gouts;
  for (int i = 0; f.find(name + ".in" + std::to_string(i)); ++i)
    raw.push_back(f.at(name + ".in" + std::to_string(i)));
  for (int j = 0; f.find(name + ".gout" + std::to_string(j)); ++j)
    gouts.push_back(f.at(name + ".gout" + std::to_string(j)));
  REQUIRE(!gouts.empty());

  const ParityTolerance tol;
  for (DType dt : {kFloat64, kFloat32}) {
    const std::string suffix = dt == kFloat64 ? "" : "_f32";
    const double atol = dt == kFloat64 ? tol.atol64 : tol.atol32;
    const double rtol = dt == kFloat64 ? tol.rtol64 : tol.rtol32;
    INFO("dtype " << dtype_name(dt));
    m.to(dt);
    m.load_state_dict(params);
    std::vector<Tensor> xs, targets, gout_dt;
    std::vector<std::string> target_names;
    for (const auto& [pname, p] : m.named_parameters()) {
      targets.push_back(p);
      target_names.push_back(name + ".grad." + pname);
    }
    for (size_t i = 0; i < raw.size(); ++i) {
      Tensor x = raw[i];
      if (is_floating(x.dtype())) {
        x = x.to(dt).detach().requires_grad_();
        targets.push_back(x);
        target_names.push_back(name + ".grad_in" + std::to_string(i));
      }
      xs.push_back(x);
    }
    std::vector<Tensor> outs = fn(xs);
    REQUIRE(outs.size() == gouts.size());
    for (size_t j = 0; j < outs.size(); ++j) {
      INFO("output " << j);
      CHECK_CLOSE(outs[j], f.at(name + ".out" + std::to_string(j) + suffix), atol, rtol);
      gout_dt.push_back(gouts[j].to(dt));
    }
    auto grads = autograd::grad(outs, targets, gout_dt, false, false, /*allow_unused=*/true);
    for (size_t k = 0; k < targets.size(); ++k) {
      INFO("gradient " << target_names[k]);
      const Tensor& expected = f.at(target_names[k] + suffix);
      Tensor g = grads[k].defined() ? grads[k] : zeros_like(expected);
      CHECK_CLOSE(g, expected, atol, rtol);
    }
  }
}

std::vector<Tensor> both(const nn::GRU::Output& o) { return {o.output, o.h_n}; }

}  // namespace

TEST_CASE("Parity with torch.nn.GRU: outputs, h_n, every gradient", "[nn][parity]") {
  SECTION("2 layers, time-major, h0") {
    nn::GRU gru(3, 4, 2);
    check_module_parity("gru_2layer", gru, [&](const auto& x) { return both(gru(x[0], x[1])); });
  }
  SECTION("2 layers, batch_first, no h0") {
    nn::GRU gru(3, 4, nn::GRUOptions{.num_layers = 2, .batch_first = true});
    check_module_parity("gru_2layer_batch_first", gru,
                        [&](const auto& x) { return both(gru(x[0])); });
  }
  SECTION("2 layers, batch_first, h0") {
    nn::GRU gru(2, 3, nn::GRUOptions{.num_layers = 2, .batch_first = true});
    check_module_parity("gru_batch_first_h0", gru,
                        [&](const auto& x) { return both(gru(x[0], x[1])); });
  }
  SECTION("no bias") {
    nn::GRU gru(3, 5, nn::GRUOptions{.bias = false});
    check_module_parity("gru_nobias", gru, [&](const auto& x) { return both(gru(x[0], x[1])); });
  }
  SECTION("unbatched") {
    nn::GRU gru(3, 4, 2);
    check_module_parity("gru_unbatched", gru, [&](const auto& x) { return both(gru(x[0], x[1])); });
  }
}

TEST_CASE("Parity with d2l's AdditiveAttention and DotProductAttention", "[nn][parity]") {
  auto with_mask = [](auto& m) {
    return [&m](const std::vector<Tensor>& x) {
      return std::vector<Tensor>{m(x[0], x[1], x[2], x.size() > 3 ? x[3] : Tensor())};
    };
  };
  nn::AdditiveAttention add(/*query_size=*/5, /*key_size=*/3, 7), add2(5, 3, 2);
  check_module_parity("additive_lens1d", add, with_mask(add));
  check_module_parity("additive_lens2d", add, with_mask(add));
  check_module_parity("additive_nomask", add2, with_mask(add2));
  nn::DotProductAttention dot;
  check_module_parity("dot_lens1d", dot, with_mask(dot));
  check_module_parity("dot_lens2d", dot, with_mask(dot));
  check_module_parity("dot_nomask", dot, with_mask(dot));
}

TEST_CASE("Parity with d2l's Bahdanau seq2seq under teacher forcing", "[nn][parity]") {
  nn::EncoderDecoder model(
      std::make_shared<nn::Seq2SeqEncoder>(7, 3, 4, nn::Seq2SeqOptions{.num_layers = 2}),
      std::make_shared<nn::AttentionDecoder>(7, 3, 4, nn::Seq2SeqOptions{.num_layers = 2}));
  check_module_parity("seq2seq", model, [&](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{model(x[0], x[1], x[2])};
  });
}

}  // namespace NABLA_UNITY_ID
}  // namespace
