// safetensors_equal A B: exit 0 when the two files hold the same tensors (names, dtypes, shapes
// and every data byte) and the same metadata (the checksum field aside, which covers the rest);
// else prints the first difference and exits 1. For tests/examples_determinism.sh.
#include <fmt/format.h>

#include <cstring>

#include "nabla/core/io/safetensors.h"

namespace {

// The bytes of a contiguous tensor as loaded (load_safetensors returns contiguous tensors).
std::string_view bytes_of(const nabla::Tensor& t) {
  const size_t n = static_cast<size_t>(t.numel()) * nabla::dtype_size(t.dtype());
  const char* base = static_cast<const char*>(t.storage()->data());
  return {base + static_cast<size_t>(t.offset()) * nabla::dtype_size(t.dtype()), n};
}

int compare(const std::string& path_a, const std::string& path_b) {
  const nabla::io::SafetensorsFile a = nabla::io::load_safetensors(path_a);
  const nabla::io::SafetensorsFile b = nabla::io::load_safetensors(path_b);
  if (a.tensors.size() != b.tensors.size()) {
    fmt::print("tensors differ: {} in {}, {} in {}\n", a.tensors.size(), path_a, b.tensors.size(),
               path_b);
    return 1;
  }
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& [name, ta] = a.tensors[i];
    const nabla::Tensor* tb = b.find(name);
    if (tb == nullptr || tb->dtype() != ta.dtype() || tb->shape() != ta.shape()) {
      fmt::print("tensor {}: missing or of another dtype or shape in {}\n", name, path_b);
      return 1;
    }
    if (bytes_of(ta) != bytes_of(*tb)) {
      fmt::print("tensor {}: data differs\n", name);
      return 1;
    }
  }
  auto meta_a = a.metadata, meta_b = b.metadata;
  meta_a.erase("nabla.crc32");
  meta_b.erase("nabla.crc32");
  if (meta_a != meta_b) {
    for (const auto& [key, value] : meta_a) {
      auto it = meta_b.find(key);
      if (it == meta_b.end() || it->second != value) {
        fmt::print("metadata {}: '{}' vs '{}'\n", key, value,
                   it == meta_b.end() ? "(missing)" : it->second);
        return 1;
      }
    }
    fmt::print("metadata: {} has keys {} lacks\n", path_b, path_a);
    return 1;
  }
  fmt::print("identical: {} tensors, {} metadata entries\n", a.tensors.size(), meta_a.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fmt::print(stderr, "usage: safetensors_equal A.safetensors B.safetensors\n");
    return 2;
  }
  try {
    return compare(argv[1], argv[2]);
  } catch (const std::exception& e) {
    fmt::print(stderr, "safetensors_equal: {}\n", e.what());
    return 2;
  }
}
