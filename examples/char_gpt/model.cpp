#include "examples/char_gpt/model.h"

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

namespace char_gpt {

using namespace nabla;

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// tokens must be (B, t) int64 ids in [0, vocab) and fit after `offset` cached positions.
void check_tokens(const ModelConfig& c, const Tensor& tokens, int64_t offset, bool cached) {
  const char* who = "char_gpt::Model::forward";
  if (tokens.dtype() != kInt64 || tokens.dim() != 2 || tokens.size(1) < 1)
    throw ShapeError(
        fmt::format("{}: tokens must be int64 (batch, length) with length >= 1, got "
                    "{} of shape {}",
                    who, dtype_name(tokens.dtype()), shape_str(tokens.shape())));
  const int64_t t = tokens.size(1);
  if (offset + t > c.context)
    throw ValueError(
        cached ? fmt::format("{}: {} new tokens after the {} cached positions exceed the model's "
                             "context of {} positions (learned positions end there); reset the "
                             "cache and feed the last {} tokens to go on",
                             who, t, offset, c.context, c.context)
               : fmt::format("{}: {} tokens per row exceed the model's context of {} positions "
                             "(learned positions end there); feed at most {}",
                             who, t, c.context, c.context));
  const std::vector<int64_t> ids = tokens.contiguous().to_vector<int64_t>();
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= c.vocab)
      throw IndexError(fmt::format(
          "{}: token id {} at row {}, position {} is outside the "
          "vocabulary of {} characters [0, {})",
          who, ids[i], static_cast<int64_t>(i) / t, static_cast<int64_t>(i) % t, c.vocab, c.vocab));
}

}  // namespace

Model::Model(const ModelConfig& c) : Module("char_gpt::Model"), config_(c) {
  if (c.vocab < 1 || c.context < 1 || c.layers < 1)
    throw ValueError(
        fmt::format("char_gpt::Model: vocab ({}), context ({}) and layers ({}) must "
                    "be positive",
                    c.vocab, c.context, c.layers));
  wte_ = register_module("wte", std::make_shared<nn::Embedding>(c.vocab, c.d_model));
  wpe_ = register_module("wpe", std::make_shared<nn::Embedding>(c.context, c.d_model));
  drop_ = register_module("drop", std::make_shared<nn::Dropout>(c.dropout));
  const nn::TransformerLayerOptions layer{.d_model = c.d_model,
                                          .nhead = c.heads,
                                          .dim_feedforward = c.ffn,
                                          .dropout = c.dropout,
                                          .activation = nn::FFNActivation::GELU,
                                          .batch_first = true,
                                          .norm_first = true};
  h_ = register_module("h", std::make_shared<nn::TransformerEncoder>(layer, c.layers));
  ln_f_ = register_module("ln_f", std::make_shared<nn::LayerNorm>(c.d_model));

  // GPT-2's initialisation: N(0, 0.02) weights, zero biases, and the projections that write
  // into the residual stream scaled by 1/sqrt(2 * layers) so its variance does not grow with
  // depth (Radford et al. 2019, section 2.3). LayerNorms keep ones and zeros.
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.layers));
  for (auto& [name, p] : named_parameters()) {
    if (name.find("norm") != std::string::npos || name.rfind("ln_f.", 0) == 0) continue;
    if (ends_with(name, "bias"))
      nn::init::zeros_(p);
    else if (ends_with(name, "out_proj.weight") || ends_with(name, "linear2.weight"))
      nn::init::normal_(p, 0.0, residual_std);
    else
      nn::init::normal_(p, 0.0, 0.02);
  }
}

Tensor Model::hidden(const Tensor& tokens, nn::TransformerCache* cache) {
  const int64_t offset = cache ? cache->length() : 0;
  check_tokens(config_, tokens, offset, cache != nullptr);
  const int64_t t = tokens.size(1);
  const Tensor positions =
      arange(static_cast<double>(offset), static_cast<double>(offset + t), 1.0, kInt64);
  Tensor x = (*drop_)(add((*wte_)(tokens), (*wpe_)(positions)));
  x = (*h_)(x, nn::EncoderForwardOptions{.is_causal = true, .cache = cache});
  return (*ln_f_)(x);
}

Tensor Model::project(const Tensor& hidden) const { return linear(hidden, wte_->weight()); }

Tensor Model::forward(const Tensor& tokens) { return project(hidden(tokens, nullptr)); }

Tensor Model::forward(const Tensor& tokens, nn::TransformerCache& cache) {
  return project(hidden(tokens, &cache));
}

CachedGenerator::CachedGenerator(Model& model)
    : next_(
          [&model](const Tensor& tokens, nn::TransformerCache& cache) {
            // Only the last position's logits are needed: project one row, not t.
            const Tensor h = model.hidden(tokens, &cache);
            return model.project(h.select(1, h.size(1) - 1));
          },
          model.config().vocab, model.config().context, "char_gpt::CachedGenerator") {}

Tensor CachedGenerator::logits(const Tensor& new_tokens) { return next_.logits(new_tokens); }

}  // namespace char_gpt
