#include "examples/transformer_g2p/model.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "nabla/core/io/checkpoint.h"
#include "nabla/data/tokenizer.h"

namespace nabla::examples::g2p {

using data::SpecialTokens;

namespace {

// N(0, 1/d) rows, the padding row zero: after the x sqrt(d) scaling an embedding has the unit
// scale of the sinusoidal code, as in "Attention Is All You Need" (section 3.4).
void init_embedding(const nn::Embedding& e, int64_t d_model) {
  NoGradGuard no_grad;
  nn::init::normal_(e.weight(), 0.0, 1.0 / std::sqrt(static_cast<double>(d_model)));
  e.weight().select(0, SpecialTokens::kPad).zero_();
}

std::string describe(const std::vector<int64_t>& s) {
  if (s.size() != 7) return fmt::format("[{}]", fmt::join(s, ", "));
  return fmt::format(
      "{} letters, {} phonemes, --d-model {} --heads {} --encoder-layers {} --decoder-layers {} "
      "--ffn {}",
      s[0], s[1], s[2], s[3], s[4], s[5], s[6]);
}

}  // namespace

G2pTransformer::G2pTransformer(const ModelConfig& c) : Module("G2pTransformer"), config_(c) {
  src_embed_ = register_module(
      "src_embed", std::make_shared<nn::Embedding>(c.src_vocab, c.d_model, SpecialTokens::kPad));
  tgt_embed_ = register_module(
      "tgt_embed", std::make_shared<nn::Embedding>(c.tgt_vocab, c.d_model, SpecialTokens::kPad));
  init_embedding(*src_embed_, c.d_model);
  init_embedding(*tgt_embed_, c.d_model);
  embed_dropout_ = register_module("embed_dropout", std::make_shared<nn::Dropout>(c.dropout));
  transformer_ =
      register_module("transformer", std::make_shared<nn::Transformer>(nn::TransformerOptions{
                                         .d_model = c.d_model,
                                         .nhead = c.heads,
                                         .num_encoder_layers = c.encoder_layers,
                                         .num_decoder_layers = c.decoder_layers,
                                         .dim_feedforward = c.ffn,
                                         .dropout = c.dropout,
                                         .batch_first = true,
                                         .norm_first = true}));
  generator_ = register_module("generator", std::make_shared<nn::Linear>(c.d_model, c.tgt_vocab));
  // Fixed sinusoidal positions rather than a learned table: no parameters, and the rare long
  // words (13+ letters, about 3% of the data) get positions as good as the common short ones,
  // where a learned table would have trained its last rows on few examples.
  positions_ = register_buffer("positions", nn::sinusoidal_table(c.max_len, c.d_model),
                               /*persistent=*/false);
  const auto sig = signature();
  register_buffer("config", from_vector(sig, {static_cast<int64_t>(sig.size())}));
}

std::vector<int64_t> G2pTransformer::signature() const {
  const ModelConfig& c = config_;
  return {c.src_vocab, c.tgt_vocab, c.d_model, c.heads, c.encoder_layers, c.decoder_layers, c.ffn};
}

Tensor G2pTransformer::embed(const nn::Embedding& table, const Tensor& tokens,
                             int64_t offset) const {
  const int64_t length = tokens.size(1);
  if (offset + length > config_.max_len)
    throw ValueError(fmt::format("G2pTransformer: positions {}..{} exceed max_len {}", offset,
                                 offset + length - 1, config_.max_len));
  Tensor x = mul(table(tokens), std::sqrt(static_cast<double>(config_.d_model)));
  return (*embed_dropout_)(add(x, positions_.narrow(0, offset, length)));
}

Tensor G2pTransformer::encode(const Tensor& src, const Tensor& src_padding) const {
  return (*transformer_->encoder())(embed(*src_embed_, src, 0),
                                    {.src_key_padding_mask = src_padding});
}

Tensor G2pTransformer::decode(const Tensor& tgt, int64_t offset, const Tensor& memory,
                              const Tensor& src_padding, nn::TransformerCache* cache) const {
  Tensor y = (*transformer_->decoder())(
      embed(*tgt_embed_, tgt, offset), memory,
      {.memory_key_padding_mask = src_padding, .tgt_is_causal = true, .cache = cache});
  return (*generator_)(y);
}

// ---- cached decoding ------------------------------------------------------------------------
CachedDecoder::CachedDecoder(const G2pTransformer& model, Tensor memory, Tensor src_padding,
                             int64_t max_len)
    : model_(model),
      memory0_(std::move(memory)),
      padding0_(std::move(src_padding)),
      memory_(memory0_),
      padding_(padding0_),
      cache_(max_len) {}

Tensor CachedDecoder::logits(const Tensor& new_tokens) {
  const Tensor out = model_.decode(new_tokens, cache_.length(), memory_, padding_, &cache_);
  return out.select(1, out.size(1) - 1);  // (B, V): the last new position's
}

void CachedDecoder::reorder(const Tensor& batch_index) {
  cache_.reorder(batch_index);
  memory_ = index_select(memory_, 0, batch_index);
  padding_ = index_select(padding_, 0, batch_index);
}

void CachedDecoder::reset() {
  cache_.reset();
  memory_ = memory0_;
  padding_ = padding0_;
}

void check_checkpoint_config(const std::string& path, const G2pTransformer& model) {
  if (!std::filesystem::exists(path)) return;
  const io::Checkpoint ck = io::Checkpoint::load(path);
  std::vector<int64_t> saved;
  for (const auto& [name, t] : ck.section("model"))
    if (name == "config") saved = t.to_vector<int64_t>();
  if (saved != model.signature())
    throw ValueError(fmt::format(
        "transformer_g2p: {} was written by another configuration ({}); this run has {}. "
        "Resume with the flags of that run, or choose another --out",
        path, saved.empty() ? "no config record" : describe(saved), describe(model.signature())));
}

}  // namespace nabla::examples::g2p
