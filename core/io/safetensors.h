// safetensors: nabla's one file format (weights, checkpoints, test fixtures).
// Layout: u64 little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value"}}
// then the raw little-endian data; offsets are relative to the end of the header.
// Reading is strict: everything is validated before any tensor is allocated, and every error is a
// FormatError naming the file, the tensor and the byte offset (numbers no double holds, headers
// nested deeper than 64 levels and shapes whose strides overflow int64 included).
// Writing is atomic (temp file, fsync, rename): a crash leaves either the old file or the new one.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla::io {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::map<std::string, std::string>;

struct SafetensorsFile {
  NamedTensors tensors;  // in data-offset order
  Metadata metadata;
  const Tensor* find(const std::string& name) const;
  const Tensor& at(const std::string& name) const;  // throws naming the file and the key
  std::string source;
};

inline constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

SafetensorsFile load_safetensors(const std::string& path);
// Parses an in-memory file; `source` names it in error messages.
SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& source);
std::string serialize_safetensors(const NamedTensors& tensors, const Metadata& metadata = {});
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata = {});
// The bytes of a regular file; IOError naming it if it is missing, a directory or unreadable.
std::string read_file(const std::string& path);
// Writes `bytes` to path atomically: temp file in the same directory, fsync, rename, fsync dir.
void atomic_write(const std::string& path, const std::string& bytes);

}  // namespace nabla::io
