#include "examples/cross_modal_attention/model.h"

#include <fmt/format.h>

#include <filesystem>
#include <iterator>

#include "examples/cross_modal_attention/scenes.h"

namespace nabla::examples::crossmodal {

namespace {

// The last entry is the layout of this example's model, raised when its tensors change without a
// flag changing (layout 2: --window, and image2text's pooling query made from the question).
constexpr int64_t kModelLayout = 2;
constexpr const char* kSignatureFlags[] = {
    "--direction",   "--dim",          "--heads", "--ffn",    "--image-layers",
    "--text-layers", "--cross-layers", "--patch", "--window", "model layout"};
constexpr size_t kSignatureSize = std::size(kSignatureFlags);

std::string flag_value(size_t i, int64_t v) {
  if (i == 0) return v == 0 ? "text2image" : v == 1 ? "image2text" : fmt::format("?{}", v);
  return std::to_string(v);
}

std::string describe(const std::vector<int64_t>& s) {
  if (s.size() != kSignatureSize) return fmt::format("[{}]", fmt::join(s, ", "));
  std::vector<std::string> parts;
  for (size_t i = 0; i < s.size(); ++i)
    parts.push_back(fmt::format("{} {}", kSignatureFlags[i], flag_value(i, s[i])));
  return fmt::format("{}", fmt::join(parts, " "));
}

nn::TransformerLayerOptions encoder_layer(const ModelConfig& c) {
  return {.d_model = c.dim,
          .nhead = c.heads,
          .dim_feedforward = c.ffn,
          .dropout = c.dropout,
          .activation = nn::FFNActivation::GELU,
          .batch_first = true,
          .norm_first = true};
}

}  // namespace

const char* direction_name(Direction d) {
  return d == Direction::kTextToImage ? "text2image" : "image2text";
}

// ---- CrossAttentionBlock --------------------------------------------------------------------
CrossAttentionBlock::CrossAttentionBlock(int64_t dim, int64_t heads, int64_t ffn, double dropout)
    : Module("CrossAttentionBlock") {
  norm1_ = register_module("norm1", std::make_shared<nn::LayerNorm>(dim));
  attn_ = register_module("attn", std::make_shared<nn::MultiheadAttention>(
                                      dim, heads, dropout, true, 0, 0, /*batch_first=*/true));
  norm2_ = register_module("norm2", std::make_shared<nn::LayerNorm>(dim));
  linear1_ = register_module("linear1", std::make_shared<nn::Linear>(dim, ffn));
  linear2_ = register_module("linear2", std::make_shared<nn::Linear>(ffn, dim));
  dropout_ = register_module("dropout", std::make_shared<nn::Dropout>(dropout));
}

Tensor CrossAttentionBlock::forward(const Tensor& x, const Tensor& context,
                                    const Tensor& context_padding) const {
  const Tensor q = (*norm1_)(x);
  nn::MhaOutput a = (*attn_)(
      q, context, context,
      {.key_padding_mask = context_padding, .need_weights = store_, .average_attn_weights = false});
  if (store_) weights_ = a.weights.detach();
  const Tensor y = add(x, (*dropout_)(a.output));
  const Tensor f = (*linear2_)((*dropout_)(gelu((*linear1_)((*norm2_)(y)))));
  return add(y, (*dropout_)(f));
}

// ---- CrossModalModel ------------------------------------------------------------------------
CrossModalModel::CrossModalModel(const ModelConfig& c) : Module("CrossModalModel"), config_(c) {
  if (c.patch <= 0 || kItemSize % c.patch != 0)
    throw ValueError(fmt::format(
        "CrossModalModel: --patch {} must divide 28, so that every patch lies in one item",
        c.patch));
  if (c.dim <= 0 || c.heads <= 0 || c.dim % c.heads != 0 || c.ffn <= 0)
    throw ValueError(fmt::format(
        "CrossModalModel: --dim {} must be a positive multiple of --heads {}, --ffn {} positive",
        c.dim, c.heads, c.ffn));
  if (c.image_layers < 0 || c.text_layers < 0 || c.cross_layers < 1)
    throw ValueError(fmt::format(
        "CrossModalModel: --image-layers {} and --text-layers {} must be >= 0, --cross-layers {} "
        ">= 1",
        c.image_layers, c.text_layers, c.cross_layers));
  grid_ = kSceneSize / c.patch;
  if (c.window < 0 || (c.window > 0 && (c.window % c.patch != 0 || kSceneSize % c.window != 0)))
    throw ValueError(fmt::format(
        "CrossModalModel: --window {} must be 0 (no windows) or a multiple of --patch {} that "
        "divides 56",
        c.window, c.patch));
  patch_embed_ =
      register_module("patch_embed", std::make_shared<nn::PatchEmbedding>(1, c.dim, c.patch));
  image_pos_ = register_parameter("image_pos", zeros({1, grid_ * grid_, c.dim}));
  image_encoder_ = register_module("image_encoder", std::make_shared<nn::TransformerEncoder>(
                                                        encoder_layer(c), c.image_layers, true));
  token_embed_ = register_module(
      "token_embed", std::make_shared<nn::Embedding>(static_cast<int64_t>(words().size()), c.dim,
                                                     std::optional<int64_t>(kPadToken)));
  text_pos_ = register_parameter("text_pos", zeros({1, kMaxQuestionTokens, c.dim}));
  text_encoder_ = register_module("text_encoder", std::make_shared<nn::TransformerEncoder>(
                                                      encoder_layer(c), c.text_layers, true));
  cross_ = register_module("cross", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.cross_layers; ++i)
    cross_->push_back(std::make_shared<CrossAttentionBlock>(c.dim, c.heads, c.ffn, c.dropout));
  if (c.direction == Direction::kImageToText) {
    pool_norm_ = register_module("pool_norm", std::make_shared<nn::LayerNorm>(c.dim));
    pool_ = register_module("pool", std::make_shared<nn::MultiheadAttention>(
                                        c.dim, c.heads, c.dropout, true, 0, 0, true));
  }
  head_norm_ = register_module("head_norm", std::make_shared<nn::LayerNorm>(c.dim));
  head_ = register_module("head", std::make_shared<nn::Linear>(c.dim, kAnswers));
  // The patch positions start at the scale of the patch embeddings (~0.5), not ViT's 0.02: the
  // answers depend on where things are, and with positions 30x weaker than the content a small
  // model sat at chance on "where" for 3000 steps (64k scenes), where with 0.5 it reached 0.55
  // by step 2000 (measured, --dim 32, 2 image layers). Word vectors and the question's positions
  // as GPT-2's, N(0, 0.02^2), the padding row zero.
  nn::init::trunc_normal_(image_pos_, 0.0, 0.5, -1.0, 1.0);
  nn::init::trunc_normal_(text_pos_, 0.0, 0.02);
  {
    NoGradGuard no_grad;
    nn::init::normal_(token_embed_->weight(), 0.0, 0.02);
    token_embed_->weight().select(0, kPadToken).zero_();
  }
  const auto sig = signature();
  register_buffer("config", from_vector(sig, {static_cast<int64_t>(sig.size())}));
}

std::vector<int64_t> CrossModalModel::signature() const {
  const ModelConfig& c = config_;
  return {c.direction == Direction::kTextToImage ? 0 : 1,
          c.dim,
          c.heads,
          c.ffn,
          c.image_layers,
          c.text_layers,
          c.cross_layers,
          c.patch,
          c.window,
          kModelLayout};
}

void CrossModalModel::set_store_attention(bool on) {
  store_ = on;
  for (size_t i = 0; i < cross_->size(); ++i)
    cross_->at<CrossAttentionBlock>(i)->set_store_attention(on);
  if (!on) patch_attention_ = Tensor();
}

Tensor CrossModalModel::image_features(const Tensor& images) const {
  const Tensor x = add((*patch_embed_)(images), image_pos_);  // (B, S, d), row-major patches
  const int64_t w = config_.window / config_.patch;           // patches per window side
  if (w == 0 || w == grid_) return (*image_encoder_)(x);
  // Windows as batch rows (Swin's window partition, Liu et al. 2021): (B, g/w, w, g/w, w, d) ->
  // (B * (g/w)^2, w * w, d), encoded, then put back in row-major order.
  const int64_t B = images.size(0), n = grid_ / w, d = config_.dim;
  const Tensor windows =
      x.reshape({B, n, w, n, w, d}).permute({0, 1, 3, 2, 4, 5}).reshape({B * n * n, w * w, d});
  return (*image_encoder_)(windows)
      .reshape({B, n, n, w, w, d})
      .permute({0, 1, 3, 2, 4, 5})
      .reshape({B, grid_ * grid_, d});
}

Tensor CrossModalModel::text_features(const Tensor& tokens, const Tensor& padding) const {
  const Tensor x = add((*token_embed_)(tokens), text_pos_.narrow(1, 0, tokens.size(1)));
  return (*text_encoder_)(x, nn::EncoderForwardOptions{.src_key_padding_mask = padding});
}

Tensor CrossModalModel::forward(const Tensor& images, const Tensor& questions) const {
  if (images.dim() != 4 || images.size(1) != 1 || images.size(2) != kSceneSize ||
      images.size(3) != kSceneSize || questions.dim() != 3 || questions.dtype() != kInt64 ||
      questions.size(0) != images.size(0) || questions.size(2) < 1 ||
      questions.size(2) > kMaxQuestionTokens)
    throw ShapeError(fmt::format(
        "CrossModalModel: expected images (B, 1, 56, 56) and int64 questions (B, Q, T <= {}), got "
        "{} and {} {}",
        kMaxQuestionTokens, shape_str(images.shape()), shape_str(questions.shape()),
        dtype_name(questions.dtype())));
  const int64_t B = images.size(0), Q = questions.size(1), T = questions.size(2);
  const int64_t S = grid_ * grid_, d = config_.dim;
  const Tensor image = image_features(images);  // (B, S, d)
  const Tensor tokens = questions.reshape({B * Q, T});
  const Tensor padding = eq(tokens, static_cast<double>(kPadToken));              // (B*Q, T)
  const Tensor text = text_features(tokens, padding);                             // (B*Q, T, d)
  const Tensor keep = masked_fill(ones({B * Q, T}), padding, 0.0).unsqueeze(-1);  // (B*Q, T, 1)
  Tensor pooled;                                                                  // (B*Q, d)
  if (config_.direction == Direction::kTextToImage) {
    // A scene's questions share its image: their tokens query it together (each query row's
    // softmax is its own, so this is the same as one question at a time).
    Tensor x = text.reshape({B, Q * T, d});
    for (size_t i = 0; i < cross_->size(); ++i)
      x = (*cross_->at<CrossAttentionBlock>(i))(x, image, Tensor());
    x = x.reshape({B * Q, T, d});
    pooled = div(sum(mul(x, keep), {1}), sum(keep, {1}));
    if (store_) {
      Tensor maps = zeros({B * Q, S});
      for (size_t i = 0; i < cross_->size(); ++i) {
        const Tensor w = cross_->at<CrossAttentionBlock>(i)->attention_weights();  // (B,H,QT,S)
        const int64_t H = w.size(1);
        const Tensor per_question =
            w.reshape({B, H, Q, T, S}).permute({0, 2, 1, 3, 4}).reshape({B * Q, H, T, S});
        maps = add(maps, mean_attention(per_question, padding));
      }
      patch_attention_ = div(maps, static_cast<double>(cross_->size())).reshape({B, Q, S}).detach();
    }
  } else {
    Tensor x = repeat_interleave(image, Q, 0);  // (B*Q, S, d): one copy per question
    for (size_t i = 0; i < cross_->size(); ++i)
      x = (*cross_->at<CrossAttentionBlock>(i))(x, text, padding);
    const Tensor normed = (*pool_norm_)(x);
    // The pooling query is the question itself (its tokens' mean): a constant query could not
    // know which item is asked about.
    const Tensor query = div(sum(mul(text, keep), {1}, true), sum(keep, {1}, true));  // (B*Q,1,d)
    nn::MhaOutput a =
        (*pool_)(query, normed, normed, {.need_weights = store_, .average_attn_weights = true});
    pooled = a.output.reshape({B * Q, d});
    if (store_) patch_attention_ = a.weights.reshape({B, Q, S}).detach();
  }
  return (*head_)((*head_norm_)(pooled)).reshape({B, Q, kAnswers});
}

// ---- attention on the target ----------------------------------------------------------------
Tensor mean_attention(const Tensor& weights, const Tensor& query_padding) {
  if (weights.dim() != 4 ||
      (query_padding.defined() &&
       (query_padding.dtype() != kBool || query_padding.dim() != 2 ||
        query_padding.size(0) != weights.size(0) || query_padding.size(1) != weights.size(2))))
    throw ShapeError(fmt::format(
        "mean_attention: expected weights (B, H, L, S) and a bool query padding (B, L), got {} "
        "and {}",
        shape_str(weights.shape()),
        query_padding.defined() ? shape_str(query_padding.shape()) : "none"));
  const Tensor over_heads = mean(weights, {1});  // (B, L, S)
  if (!query_padding.defined()) return mean(over_heads, {1});
  const Tensor keep = masked_fill(ones(query_padding.shape(), weights.dtype()), query_padding, 0.0);
  // A question of padding only (none is made) would weigh nothing rather than divide by zero.
  const Tensor share =
      div(keep, clamp(sum(keep, {1}, true), std::optional<double>(1.0), std::nullopt));
  return sum(mul(over_heads, share.unsqueeze(-1)), {1});
}

std::vector<double> attention_on_quadrant(const Tensor& maps, const std::vector<int64_t>& quadrant,
                                          int64_t grid) {
  if (maps.dim() != 2 || maps.size(1) != grid * grid ||
      maps.size(0) != static_cast<int64_t>(quadrant.size()))
    throw ShapeError(fmt::format(
        "attention_on_quadrant: expected maps ({}, {}) for {} quadrants of a {} x {} grid, got {}",
        quadrant.size(), grid * grid, quadrant.size(), grid, grid, shape_str(maps.shape())));
  const auto m = maps.detach().to(kFloat64).contiguous().to_vector<double>();
  const auto S = static_cast<size_t>(grid * grid);
  std::vector<double> share(quadrant.size(), 0.0);
  for (size_t n = 0; n < quadrant.size(); ++n) {
    if (quadrant[n] < 0 || quadrant[n] >= kQuadrants)
      throw IndexError(fmt::format("attention_on_quadrant: quadrant {} of map {} is not in [0, 4)",
                                   quadrant[n], n));
    for (size_t s = 0; s < S; ++s)
      if (patch_quadrant(static_cast<int64_t>(s), grid) == quadrant[n]) share[n] += m[n * S + s];
  }
  return share;
}

void check_checkpoint_config(const std::string& path, const CrossModalModel& model) {
  if (!std::filesystem::exists(path)) return;
  const io::Checkpoint ck = io::Checkpoint::load(path);
  std::vector<int64_t> saved;
  for (const auto& [name, t] : ck.section("model"))
    if (name == "config") saved = t.to_vector<int64_t>();
  const std::vector<int64_t> mine = model.signature();
  if (saved == mine) return;
  // A record without the layout entry, or with another layout: flags cannot fix that.
  if (saved.size() != kSignatureSize || saved.back() != kModelLayout)
    throw ValueError(fmt::format(
        "cross_modal_attention: {} holds a model of an older layout of this example ({}) and this "
        "run builds layout {} ({}); it cannot be resumed or asked: train again with another --out",
        path, saved.empty() ? "no config record" : fmt::format("[{}]", fmt::join(saved, ", ")),
        kModelLayout, describe(mine)));
  std::vector<std::string> differ;
  for (size_t i = 0; i < kSignatureSize && saved.size() == kSignatureSize; ++i)
    if (saved[i] != mine[i]) differ.emplace_back(kSignatureFlags[i]);
  throw ValueError(fmt::format(
      "cross_modal_attention: {} was written by a '{}' model and this run is '{}': {} {}. Resume "
      "with the flags of that run, or choose another --out",
      path, saved.empty() ? "no config record" : describe(saved), describe(mine),
      differ.empty() ? "the configuration" : fmt::format("{}", fmt::join(differ, ", ")),
      differ.size() == 1 ? "differs" : "differ"));
}

}  // namespace nabla::examples::crossmodal
