#include "examples/serve/request.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "examples/serve/vit_adapter.h"
#include "nabla/data/tokenizer.h"

namespace nabla::serve {

bool valid_utf8(const std::string& s, size_t* bad_offset) {
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = b[i];
    size_t len = 0;
    uint32_t cp = 0, min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    }
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (b[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (b[i + k] & 0x3F);
    }
    ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    i += len;
  }
  return true;
}

namespace {

bool want_attention(const nlohmann::json& j) {
  if (!j.contains("attention")) return false;
  if (!j["attention"].is_boolean())
    throw RequestError(400, fmt::format("\"attention\" must be true or false, not {}",
                                        j["attention"].type_name()));
  return j["attention"].get<bool>();
}

Input parse_text(const nlohmann::json& j, size_t max_text_bytes) {
  if (!j.contains("text")) throw RequestError(400, "missing field \"text\" (a string)");
  const auto& t = j["text"];
  if (!t.is_string())
    throw RequestError(400, fmt::format("\"text\" must be a string, not {}", t.type_name()));
  const auto& text = t.get_ref<const std::string&>();
  if (text.empty()) throw RequestError(422, "\"text\" is empty: nothing to classify");
  if (text.size() > max_text_bytes)
    throw RequestError(413, fmt::format("\"text\" has {} bytes, the limit is {} (--max-text-bytes)",
                                        text.size(), max_text_bytes));
  Input in;
  in.tokens = data::ByteTokenizer().encode(text);
  in.want_attention = want_attention(j);
  return in;
}

Input parse_image(const nlohmann::json& j) {
  constexpr int64_t side = VitAdapter::kSide;
  if (!j.contains("image"))
    throw RequestError(400, "missing field \"image\" (28 rows of 28 numbers in [0, 1])");
  const auto& rows = j["image"];
  if (!rows.is_array() || rows.size() != side)
    throw RequestError(400, fmt::format("\"image\" must be an array of {} rows", side));
  Input in;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!rows[r].is_array() || rows[r].size() != side)
      throw RequestError(400,
                         fmt::format("\"image\" row {} must be an array of {} numbers", r, side));
    for (size_t c = 0; c < rows[r].size(); ++c) {
      const auto& v = rows[r][c];
      if (!v.is_number() || !(v.get<double>() >= 0.0 && v.get<double>() <= 1.0))
        throw RequestError(400, fmt::format("\"image\"[{}][{}] must be a number in [0, 1], not {}",
                                            r, c, v.dump()));
      in.pixels.push_back(v.get<float>());
    }
  }
  in.want_attention = want_attention(j);
  return in;
}

}  // namespace

Input parse_predict_request(const std::string& body, ModelKind kind, size_t max_text_bytes) {
  if (body.empty()) throw RequestError(400, "empty body: send a JSON object");
  size_t bad = 0;
  // JSON text must be UTF-8 (RFC 8259); nlohmann rejects it too, but less precisely.
  if (!valid_utf8(body, &bad))
    throw RequestError(400, fmt::format("the body is not valid UTF-8 (byte offset {})", bad));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body);
  } catch (const nlohmann::json::parse_error& e) {
    throw RequestError(400, fmt::format("malformed JSON at byte {}: {}", e.byte, e.what()));
  }
  if (!j.is_object())
    throw RequestError(400, fmt::format("the body must be a JSON object, not {}", j.type_name()));
  return kind == ModelKind::LangId ? parse_text(j, max_text_bytes) : parse_image(j);
}

std::string prediction_json(const Prediction& p, const std::vector<std::string>& labels,
                            const Input& input, ModelKind kind) {
  nlohmann::ordered_json j;
  j["label"] = labels[static_cast<size_t>(p.label)];
  j["label_index"] = p.label;
  nlohmann::ordered_json probs;
  for (size_t i = 0; i < labels.size(); ++i) probs[labels[i]] = p.probabilities[i];
  j["probabilities"] = probs;
  j["windows"] = p.windows;
  if (input.want_attention) {
    nlohmann::ordered_json a;
    if (kind == ModelKind::LangId) {
      // Characters (UTF-8 code points), each with the summed weight of its bytes; bytes past a
      // truncated input's max_len get 0.
      std::string text;
      for (int64_t t : input.tokens)
        text.push_back(static_cast<char>(t - data::SpecialTokens::kCount));
      std::vector<std::string> chars;
      std::vector<double> weights;
      size_t byte = 0;
      for (const std::string& ch : data::utf8_chars(text)) {
        double w = 0;
        for (size_t k = 0; k < ch.size(); ++k, ++byte)
          if (byte < p.attention.size()) w += p.attention[byte];
        chars.push_back(ch);
        weights.push_back(w);
      }
      a["tokens"] = chars;
      a["weights"] = weights;
    } else {
      a["weights"] = p.attention;
    }
    j["attention"] = a;
  }
  return j.dump();
}

std::string error_json(const std::string& message) {
  return nlohmann::json{{"error", message}}.dump();
}

}  // namespace nabla::serve
