#include "examples/serve/langid_adapter.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "examples/transformer_langid/langid_model.h"
#include "nabla/nabla.h"

namespace nabla::serve {

namespace {

// The example's model (examples/transformer_langid/langid_model.h), inference only: no dropout.
examples::LangIdSize model_size(const LangIdConfig& c) {
  examples::LangIdSize size;
  size.d_model = c.d_model;
  size.heads = c.heads;
  size.layers = c.layers;
  size.ffn = c.ffn;
  size.max_len = c.max_len;
  size.ngram_buckets = c.ngram_buckets;
  size.dropout = 0.0;
  return size;
}

const Tensor& find_tensor(const io::NamedTensors& model, const std::string& name,
                          const std::string& path) {
  for (const auto& [key, t] : model)
    if (key == name) return t;
  throw FormatError(fmt::format(
      "nabla-serve: {} has no tensor model.{} (not a transformer_langid checkpoint?)", path, name));
}

}  // namespace

LangIdConfig read_langid_config(const std::string& checkpoint, const LangIdConfig& fallback) {
  LangIdConfig c = fallback;
  const io::Checkpoint ck = io::Checkpoint::load(checkpoint);
  const io::NamedTensors& model = ck.section("model");
  const Tensor& emb = find_tensor(model, "embedding.weight", checkpoint);
  c.vocab = emb.size(0);
  c.d_model = emb.size(1);
  c.ngram_buckets = 0;
  for (const auto& [key, t] : model)
    if (key == "bigram_embedding.weight") c.ngram_buckets = t.size(0);
  c.ffn = find_tensor(model, "encoder.layers.0.linear1.weight", checkpoint).size(0);
  c.classes = find_tensor(model, "head.weight", checkpoint).size(0);
  std::set<std::string> layers;
  for (const auto& [key, t] : model)
    if (key.rfind("encoder.layers.", 0) == 0) layers.insert(key.substr(15, key.find('.', 15) - 15));
  c.layers = static_cast<int64_t>(layers.size());
  const auto json_path = std::filesystem::path(checkpoint).parent_path() / "model.json";
  if (std::filesystem::exists(json_path)) {
    std::ifstream in(json_path);
    try {
      const auto j = nlohmann::json::parse(in);
      c.heads = j.at("heads").get<int64_t>();
      c.max_len = j.at("max_len").get<int64_t>();
      c.languages = j.at("languages").get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception& e) {
      throw FormatError(fmt::format("nabla-serve: {}: {}", json_path.string(), e.what()));
    }
  }
  if (c.languages.empty())
    for (const auto& l : data::fortune_languages()) c.languages.push_back(l.code);
  if (static_cast<int64_t>(c.languages.size()) != c.classes)
    throw FormatError(fmt::format("nabla-serve: {} has {} classes but {} language names",
                                  checkpoint, c.classes, c.languages.size()));
  if (c.d_model % c.heads != 0)
    throw FormatError(fmt::format("nabla-serve: d_model {} of {} is not divisible by {} heads",
                                  c.d_model, checkpoint, c.heads));
  return c;
}

LangIdAdapter::LangIdAdapter(const std::string& checkpoint, const LangIdConfig& fallback,
                             nn::LongInputOptions long_input)
    : config_(read_langid_config(checkpoint, fallback)), long_input_(long_input) {
  long_input_.max_len = static_cast<size_t>(config_.max_len);
  model_ =
      std::make_unique<examples::LangIdModel>(model_size(config_), config_.vocab, config_.classes);
  model_->load_state_dict(io::Checkpoint::load(checkpoint).section("model"));
  model_->eval();
}

LangIdAdapter::LangIdAdapter(const LangIdConfig& c, nn::LongInputOptions long_input, uint64_t seed)
    : config_(c), long_input_(long_input) {
  long_input_.max_len = static_cast<size_t>(config_.max_len);
  if (config_.languages.empty())
    for (int64_t i = 0; i < c.classes; ++i) config_.languages.push_back(fmt::format("c{}", i));
  manual_seed(seed);
  model_ =
      std::make_unique<examples::LangIdModel>(model_size(config_), config_.vocab, config_.classes);
  model_->eval();
}

LangIdAdapter::~LangIdAdapter() = default;

int64_t LangIdAdapter::length(const Input& input) const {
  return std::min<int64_t>(static_cast<int64_t>(input.tokens.size()), config_.max_len);
}

std::string LangIdAdapter::describe() const {
  return fmt::format(
      "transformer_langid: d_model {} heads {} layers {} ffn {} max_len {} ngram buckets {}, "
      "languages {}, long inputs: {}",
      config_.d_model, config_.heads, config_.layers, config_.ffn, config_.max_len,
      config_.ngram_buckets, fmt::join(config_.languages, " "),
      nn::long_input_mode_name(long_input_.mode));
}

void LangIdAdapter::prepare(Input& in) const {
  const int64_t hash_buckets = std::max<int64_t>(config_.ngram_buckets, 2);
  in.windows = nn::long_input_windows(in.tokens.size(), long_input_);
  in.window_tokens.clear(), in.window_bigrams.clear(), in.window_trigrams.clear();
  for (const auto& w : in.windows) {
    const auto first = in.tokens.begin() + static_cast<std::ptrdiff_t>(w.begin);
    in.window_tokens.emplace_back(first, first + static_cast<std::ptrdiff_t>(w.size()));
    in.window_bigrams.push_back(examples::ngram_ids(in.window_tokens.back(), 2, hash_buckets));
    in.window_trigrams.push_back(examples::ngram_ids(in.window_tokens.back(), 3, hash_buckets));
  }
  in.prepared = true;
}

std::vector<Prediction> LangIdAdapter::predict(const std::vector<const Input*>& given) {
  NoGradGuard no_grad;
  // Inputs not prepared on an HTTP thread (direct calls) are prepared here.
  std::vector<Input> local;
  std::vector<const Input*> batch;
  local.reserve(given.size());
  for (const Input* in : given) {
    if (!in->prepared) {
      local.push_back(*in);
      prepare(local.back());
      in = &local.back();
    }
    batch.push_back(in);
  }
  // Every input's windows are rows; row r is window `window` of input `input`.
  struct Row {
    size_t input, window;
    int64_t length;
  };
  std::vector<Row> rows;
  for (size_t i = 0; i < batch.size(); ++i)
    for (size_t w = 0; w < batch[i]->windows.size(); ++w)
      rows.push_back({i, w, static_cast<int64_t>(batch[i]->windows[w].size())});
  std::vector<size_t> order(rows.size());
  for (size_t r = 0; r < order.size(); ++r) order[r] = r;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rows[a].length < rows[b].length; });
  bool any_attention = false;
  for (const Input* in : batch) any_attention = any_attention || in->want_attention;
  model_->store_attention(any_attention);
  // Per row: its logits (float64), and with attention its (H, T, T) weights of width T.
  const auto classes = static_cast<size_t>(config_.classes);
  std::vector<double> row_logits(rows.size() * classes);
  std::vector<std::vector<float>> row_attention(rows.size());
  std::vector<int64_t> row_width(rows.size(), 0);
  int64_t heads = 0;
  for (size_t begin = 0; begin < order.size();) {
    // Sorted ascending, so the group's padded width is its last row's length.
    size_t end = begin + 1;
    int64_t real = rows[order[begin]].length;
    for (; end < order.size(); ++end) {
      const int64_t next = rows[order[end]].length;
      const auto padded = static_cast<double>(static_cast<int64_t>(end - begin + 1) * next);
      if (real >= kMinGroupTokens && padded > kMaxPadding * static_cast<double>(real + next)) break;
      real += next;
    }
    std::vector<std::vector<int64_t>> tokens, bigrams, trigrams;
    for (size_t k = begin; k < end; ++k) {
      const Row& r = rows[order[k]];
      tokens.push_back(batch[r.input]->window_tokens[r.window]);
      bigrams.push_back(batch[r.input]->window_bigrams[r.window]);
      trigrams.push_back(batch[r.input]->window_trigrams[r.window]);
    }
    const data::PaddedBatch padded = data::pad_sequences(tokens, data::SpecialTokens::kPad);
    const Tensor logits =
        model_
            ->forward(padded.tokens, data::pad_sequences(bigrams, 0).tokens,
                      data::pad_sequences(trigrams, 0).tokens, padded.key_padding_mask)
            .to(kFloat64)
            .contiguous();
    const int64_t width = padded.tokens.size(1);
    count_forward(static_cast<int64_t>(end - begin), real,
                  static_cast<int64_t>(end - begin) * width);
    const double* lp = logits.data_ptr<double>();
    std::vector<float> attention;  // (group rows, H, T, T) row-major
    if (any_attention) {
      const Tensor& a = model_->last_attention();
      heads = a.size(1);
      attention = a.contiguous().to_vector<float>();
    }
    for (size_t k = begin; k < end; ++k) {
      const size_t r = order[k], g = k - begin;
      std::copy(lp + g * classes, lp + (g + 1) * classes, row_logits.begin() + r * classes);
      row_width[r] = width;
      if (any_attention && batch[rows[r].input]->want_attention) {
        const size_t cells = static_cast<size_t>(heads * width * width);
        row_attention[r].assign(attention.begin() + static_cast<std::ptrdiff_t>(g * cells),
                                attention.begin() + static_cast<std::ptrdiff_t>((g + 1) * cells));
      }
    }
    begin = end;
  }
  std::vector<Prediction> out;
  size_t row = 0;  // the first row of input i (rows are in input order)
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto& ws = batch[i]->windows;
    std::vector<size_t> counts;
    for (const auto& w : ws) counts.push_back(w.size());
    const std::vector<double> mine(
        row_logits.begin() + static_cast<std::ptrdiff_t>(row * classes),
        row_logits.begin() + static_cast<std::ptrdiff_t>((row + ws.size()) * classes));
    const Tensor logits = from_vector(mine, {static_cast<int64_t>(ws.size()), config_.classes});
    Prediction p;
    p.probabilities = exp(nn::combine_window_logits(logits, counts)).to_vector<double>();
    p.label = static_cast<int64_t>(
        std::max_element(p.probabilities.begin(), p.probabilities.end()) - p.probabilities.begin());
    p.windows = static_cast<int64_t>(ws.size());
    if (batch[i]->want_attention) {
      // Each position's received attention, averaged over heads, query positions and the
      // windows that contain it.
      const size_t covered = ws.back().end;
      std::vector<double> total(covered, 0.0), seen(covered, 0.0);
      for (size_t k = 0; k < ws.size(); ++k) {
        const auto n = static_cast<int64_t>(ws[k].size());
        const std::vector<float>& attention = row_attention[row + k];
        const int64_t width = row_width[row + k];
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t q = 0; q < n; ++q)
            for (int64_t key = 0; key < n; ++key)
              total[ws[k].begin + static_cast<size_t>(key)] +=
                  attention[static_cast<size_t>((h * width + q) * width + key)] /
                  static_cast<double>(heads * n);
        for (int64_t key = 0; key < n; ++key) seen[ws[k].begin + static_cast<size_t>(key)] += 1;
      }
      double norm = 0;
      for (size_t t = 0; t < covered; ++t) norm += total[t] /= seen[t];
      for (double& v : total) v /= norm;
      p.attention = std::move(total);
    }
    row += ws.size();
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace nabla::serve
