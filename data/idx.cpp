#include "nabla/data/idx.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "nabla/core/error.h"

namespace nabla::data {
namespace {

// The largest IDX payload accepted (64 GiB): larger headers are corrupt, not datasets.
constexpr uint64_t kMaxIdxBytes = uint64_t{1} << 36;

// The decompressed bytes of a plain or gzip file, read on demand: the reader asks for exactly
// what the IDX header declares (plus one byte to detect excess), so a small gzip file that
// inflates to gigabytes is rejected after the declared size, not after inflating all of it.
// The gzip stream must end with its trailer (CRC-32 and size, checked by zlib) and be followed
// by nothing but further gzip members.
class ByteSource {
 public:
  explicit ByteSource(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw IOError(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      const bool is_dir = S_ISDIR(st.st_mode);
      ::close(fd_);
      throw IOError(fmt::format(
          "{}: {}", path, is_dir ? "is a directory, not an IDX file" : "is not a regular file"));
    }
    file_size_ = static_cast<uint64_t>(st.st_size);
    fill_input();
    gzip_ = in_end_ >= 2 && in_[0] == 0x1f && in_[1] == 0x8b;
    if (gzip_ && inflateInit2(&zs_, 15 + 16) != Z_OK) {  // 15 + 16: zlib's gzip-only mode
      ::close(fd_);
      throw IOError(fmt::format("{}: zlib could not start", path));
    }
  }
  ~ByteSource() {
    if (gzip_) inflateEnd(&zs_);
    ::close(fd_);
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  bool gzip() const { return gzip_; }
  uint64_t file_size() const { return file_size_; }
  // Where reading stopped, for error messages.
  std::string progress() const {
    return fmt::format("after reading {} of the file's {} {}bytes", consumed_, file_size_,
                       gzip_ ? "compressed " : "");
  }

  // Up to n bytes into dst; fewer only at the (valid) end of the data.
  size_t read(uint8_t* dst, size_t n) {
    size_t done = 0;
    while (done < n) {
      if (in_pos_ == in_end_ && !fill_input()) {
        if (gzip_ && !stream_ended_)
          throw FormatError(fmt::format(
              "{}: gzip stream cut short after {} compressed bytes ({} decompressed): no "
              "end-of-stream trailer (truncated)",
              path_, consumed_, produced_));
        break;
      }
      if (!gzip_) {
        const size_t take = std::min(n - done, in_end_ - in_pos_);
        std::memcpy(dst + done, in_.data() + in_pos_, take);
        in_pos_ += take;
        consumed_ += take;
        done += take;
        continue;
      }
      if (stream_ended_) start_next_member();
      zs_.next_in = in_.data() + in_pos_;
      zs_.avail_in = static_cast<uInt>(in_end_ - in_pos_);
      zs_.next_out = dst + done;
      zs_.avail_out = static_cast<uInt>(std::min<size_t>(n - done, 1u << 30));
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      const size_t used = (in_end_ - in_pos_) - zs_.avail_in;
      const size_t made = static_cast<size_t>(zs_.next_out - (dst + done));
      in_pos_ += used;
      consumed_ += used;
      produced_ += made;
      done += made;
      if (rc == Z_STREAM_END) {
        stream_ended_ = true;
      } else if ((rc != Z_OK && rc != Z_BUF_ERROR) || (used == 0 && made == 0)) {
        throw FormatError(
            fmt::format("{}: corrupt gzip data at compressed offset {} ({} bytes "
                        "decompressed): {}",
                        path_, consumed_, produced_, zs_.msg ? zs_.msg : "error"));
      }
    }
    return done;
  }

 private:
  // Refills the input buffer; false at the end of the file.
  bool fill_input() {
    for (;;) {
      const ssize_t got = ::read(fd_, in_.data(), in_.size());
      if (got < 0 && errno == EINTR) continue;
      if (got < 0)
        throw IOError(fmt::format("{}: read failed at offset {} ({})", path_, consumed_,
                                  std::strerror(errno)));
      in_pos_ = 0;
      in_end_ = static_cast<size_t>(got);
      return got > 0;
    }
  }
  // After one gzip member only another may follow (gzip -c a b > c); anything else is junk.
  void start_next_member() {
    if (in_end_ - in_pos_ < 2) {  // keep the two magic bytes together
      std::memmove(in_.data(), in_.data() + in_pos_, in_end_ - in_pos_);
      in_end_ -= in_pos_;
      in_pos_ = 0;
      const ssize_t got = ::read(fd_, in_.data() + in_end_, in_.size() - in_end_);
      if (got > 0) in_end_ += static_cast<size_t>(got);
    }
    if (in_end_ - in_pos_ < 2 || in_[in_pos_] != 0x1f || in_[in_pos_ + 1] != 0x8b)
      throw FormatError(fmt::format(
          "{}: junk after the gzip stream at compressed offset {} (not another gzip member)", path_,
          consumed_));
    inflateReset(&zs_);
    stream_ended_ = false;
  }

  std::string path_;
  int fd_ = -1;
  bool gzip_ = false, stream_ended_ = false;
  z_stream zs_{};
  std::array<uint8_t, 1 << 16> in_{};
  size_t in_pos_ = 0, in_end_ = 0;
  uint64_t file_size_ = 0, consumed_ = 0,
           produced_ = 0;  // compressed bytes read, decompressed bytes made
};

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

Tensor read_idx(const std::string& path) {
  ByteSource src(path);
  std::array<uint8_t, 4 + 4 * 4> head{};
  const size_t got = src.read(head.data(), 4);
  if (got < 4)
    throw FormatError(fmt::format("{}: {} bytes, too short for the 4-byte IDX magic", path, got));
  if (head[0] != 0 || head[1] != 0 || head[2] != 0x08)
    throw FormatError(fmt::format(
        "{}: bad IDX magic {:02x} {:02x} {:02x} {:02x} at offset 0 (expected 00 00 08 <ndims>)",
        path, head[0], head[1], head[2], head[3]));
  const size_t ndims = head[3];
  if (ndims == 0 || ndims > 4)
    throw FormatError(fmt::format("{}: IDX ndims {} at offset 3 is not in 1..4", path, ndims));
  const size_t header = 4 + 4 * ndims;
  if (const size_t more = src.read(head.data() + 4, header - 4); more < header - 4)
    throw FormatError(
        fmt::format("{}: truncated IDX header ({} bytes, need {})", path, 4 + more, header));
  // Checked products: a 0 dim must not hide dims whose product (and so the strides) overflow.
  Shape shape;
  uint64_t count = 1, extent = 1;
  for (size_t d = 0; d < ndims; ++d) {
    const uint32_t n = be32(head.data() + 4 + 4 * d);
    shape.push_back(n);
    count *= n;  // <= extent, which is checked
    if (__builtin_mul_overflow(extent, std::max<uint32_t>(n, 1), &extent) || extent > kMaxIdxBytes)
      throw FormatError(fmt::format(
          "{}: IDX dims at offsets 4..{} ({}) describe more than {} bytes; the header is corrupt",
          path, 4 + 4 * d + 4, fmt::join(shape, ", "), kMaxIdxBytes));
  }
  auto mismatch = [&](const std::string& found) {
    return FormatError(
        fmt::format("{}: IDX header (offset 4..{}) promises shape {} = {} bytes of data but the "
                    "{}file has {} ({})",
                    path, header, shape_str(shape), count, src.gzip() ? "decompressed " : "", found,
                    src.progress()));
  };
  if (!src.gzip() && src.file_size() != header + count)
    throw mismatch(src.file_size() < header + count
                       ? fmt::format("only {} (truncated)", src.file_size() - header)
                       : fmt::format("{} (padded)", src.file_size() - header));
  // Read what the header declares, in chunks as it arrives, then one byte more, which must not
  // exist. A lying header costs no memory: the first reservation is bounded by what the file
  // can hold (deflate expands at most 1032:1, https://zlib.net/zlib_tech.html), and chunks
  // grow from 64 KiB with the data that actually arrives (fuzzing found a 20-byte gzip file
  // reserving 64 MiB for its header's claim).
  std::vector<uint8_t> data;
  const uint64_t can_hold =
      src.gzip() && src.file_size() < count / 1032 ? src.file_size() * 1032 : count;
  data.reserve(std::min({count, can_hold, uint64_t{64} << 20}));
  for (uint64_t chunk = uint64_t{1} << 16; data.size() < count;
       chunk = std::min(chunk * 2, uint64_t{1} << 20)) {
    const size_t want = std::min<uint64_t>(count - data.size(), chunk);
    const size_t old = data.size();
    data.resize(old + want);
    const size_t n = src.read(data.data() + old, want);
    data.resize(old + n);
    if (n < want) break;
  }
  if (data.size() != count) throw mismatch(fmt::format("only {} (truncated)", data.size()));
  uint8_t extra = 0;
  if (src.read(&extra, 1) == 1) throw mismatch("more (padded)");
  Tensor t;
  try {
    t = empty(shape, kInt64);
  } catch (const Error& e) {
    throw OutOfMemoryError(fmt::format("{}: {}", path, e.what()));
  }
  int64_t* p = t.data_ptr<int64_t>();
  for (uint64_t i = 0; i < count; ++i) p[i] = data[i];
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
