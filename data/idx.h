// IDX files (the MNIST / Fashion-MNIST format), plain or gzip-compressed, read through zlib.
// Layout: magic 0x00 0x00 <type 0x08 = u8> <ndims>, then ndims big-endian u32 sizes, then the
// data. Everything is validated against the decompressed size; errors name file and offset.
// Decompression stops at the size the header declares (plus one byte, to detect excess); a gzip
// stream cut before its trailer or followed by junk is a FormatError.
#pragma once
#include <string>

#include "nabla/core/tensor.h"

namespace nabla::data {

// Raw u8 contents as int64 with the file's shape, e.g. (60000, 28, 28) or (60000,).
Tensor read_idx(const std::string& path);

struct ImageDataset {
  Tensor images;  // (N, H, W) float32 in [0, 1]
  Tensor labels;  // (N,) int64
};

// Reads <dir>/<prefix>-images-idx3-ubyte.gz and <dir>/<prefix>-labels-idx1-ubyte.gz
// (prefix "train" or "t10k"), checking that counts agree.
ImageDataset read_mnist_style(const std::string& dir, const std::string& prefix);

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

}  // namespace nabla::data
