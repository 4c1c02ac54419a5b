#include "data/idx.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstring>
#include <vector>

#include "core/error.h"

namespace nabla::data {
namespace {

std::vector<uint8_t> read_maybe_gzip(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw IOError(fmt::format("{}: no such file", path));
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files transparently too
  if (!f) throw IOError(fmt::format("{}: cannot open", path));
  std::vector<uint8_t> out;
  std::vector<uint8_t> buf(1 << 20);
  for (;;) {
    int n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()));
    if (n < 0) {
      int err = 0;
      std::string msg = gzerror(f, &err);
      gzclose(f);
      throw FormatError(fmt::format("{}: corrupt compressed data after {} decompressed bytes: {}",
                                    path, out.size(), msg));
    }
    if (n == 0) break;
    out.insert(out.end(), buf.begin(), buf.begin() + n);
  }
  gzclose(f);
  return out;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

Tensor read_idx(const std::string& path) {
  std::vector<uint8_t> bytes = read_maybe_gzip(path);
  if (bytes.size() < 4)
    throw FormatError(
        fmt::format("{}: {} bytes, too short for the 4-byte IDX magic", path, bytes.size()));
  if (bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08)
    throw FormatError(fmt::format(
        "{}: bad IDX magic {:02x} {:02x} {:02x} {:02x} at offset 0 (expected 00 00 08 <ndims>)",
        path, bytes[0], bytes[1], bytes[2], bytes[3]));
  const size_t ndims = bytes[3];
  if (ndims == 0 || ndims > 4)
    throw FormatError(fmt::format("{}: IDX ndims {} at offset 3 is not in 1..4", path, ndims));
  if (bytes.size() < 4 + 4 * ndims)
    throw FormatError(fmt::format("{}: truncated IDX header ({} bytes, need {})", path,
                                  bytes.size(), 4 + 4 * ndims));
  Shape shape;
  uint64_t count = 1;
  for (size_t d = 0; d < ndims; ++d) {
    uint32_t n = be32(bytes.data() + 4 + 4 * d);
    shape.push_back(n);
    count *= n;
    if (count > (1ull << 36))
      throw FormatError(
          fmt::format("{}: IDX dims at offset {} describe an absurd size", path, 4 + 4 * d));
  }
  const size_t header = 4 + 4 * ndims;
  if (bytes.size() - header != count)
    throw FormatError(fmt::format(
        "{}: IDX header (offset 4..{}) promises shape {} = {} bytes of data but the file has {} "
        "(truncated or padded)",
        path, header, shape_str(shape), count, bytes.size() - header));
  Tensor t = empty(shape, kInt64);
  int64_t* p = t.data_ptr<int64_t>();
  for (uint64_t i = 0; i < count; ++i) p[i] = bytes[header + i];
  return t;
}

ImageDataset read_mnist_style(const std::string& dir, const std::string& prefix) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw IOError(fmt::format(
        "{}: directory not found; install the data with `apt-get install dataset-fashion-mnist` "
        "(or run scripts/setup.sh)",
        dir));
  const std::string img_path = dir + "/" + prefix + "-images-idx3-ubyte.gz";
  const std::string lbl_path = dir + "/" + prefix + "-labels-idx1-ubyte.gz";
  Tensor images = read_idx(img_path), labels = read_idx(lbl_path);
  if (images.dim() != 3)
    throw FormatError(fmt::format("{}: expected 3 dims (N, H, W), got shape {}", img_path,
                                  shape_str(images.shape())));
  if (labels.dim() != 1 || labels.size(0) != images.size(0))
    throw FormatError(fmt::format("{}: {} labels for {} images in {}", lbl_path,
                                  labels.dim() == 1 ? labels.size(0) : -1, images.size(0),
                                  img_path));
  ImageDataset ds;
  ds.images = empty(images.shape(), kFloat32);
  const int64_t* src = images.data_ptr<int64_t>();
  float* dst = ds.images.data_ptr<float>();
  for (int64_t i = 0; i < images.numel(); ++i) dst[i] = static_cast<float>(src[i]) / 255.0f;
  ds.labels = labels;
  return ds;
}

}  // namespace nabla::data
