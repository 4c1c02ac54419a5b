// Parsing and validating a /v1/predict body, and writing the answer. Every problem is a
// RequestError with the HTTP status and a message naming the field, so the server answers
// {"error": message} and goes on serving.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>

#include "examples/serve/model_adapter.h"

namespace nabla::serve {

enum class ModelKind { LangId, Vit };

struct RequestError : std::runtime_error {
  RequestError(int http_status, const std::string& message)
      : std::runtime_error(message), status(http_status) {}
  int status;
};

// True when `s` is well-formed UTF-8 (RFC 3629: no overlongs, surrogates or code points above
// U+10FFFF); otherwise `bad_offset` is the first offending byte.
bool valid_utf8(const std::string& s, size_t* bad_offset = nullptr);

// langid: {"text": "<non-empty UTF-8, at most max_text_bytes bytes>", "attention": bool?}
// vit:    {"image": [[28 numbers in [0, 1]] x 28], "attention": bool?}
Input parse_predict_request(const std::string& body, ModelKind kind, size_t max_text_bytes);

// {"label", "label_index", "probabilities": {name: p}, "windows", and with attention
// "attention": {"tokens": [...], "weights": [...]}} (langid: tokens are the text's characters,
// each weighted by the sum over its bytes; vit: the 4x4 patch grid's weights, row-major).
std::string prediction_json(const Prediction& p, const std::vector<std::string>& labels,
                            const Input& input, ModelKind kind);

std::string error_json(const std::string& message);

}  // namespace nabla::serve
