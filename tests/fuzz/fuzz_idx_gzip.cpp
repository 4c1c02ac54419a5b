// libFuzzer target: the gzip path of data::read_idx, structure-aware. The input is two control
// bytes and the plain IDX bytes; the target compresses them itself (level, one or two gzip
// members and where to cut the stream, chosen by the control bytes), so mutations reach the IDX
// header through a valid gzip stream. Differential check: the gzip file loads exactly when the
// plain file does, with the same tensor. Then the stream is broken (cut short, or junk
// appended): that must always be a nabla::Error.
#include <zlib.h>

#include <cstring>

#include "nabla/data/idx.h"
#include "tests/fuzz/fuzz_common.h"

using namespace nabla;

namespace {

// One gzip member holding data. The deflate state (about 256 KiB at level 9) is kept per level
// and reset between inputs: initialising it every time took most of each execution.
std::string gzip(const uint8_t* data, size_t size, int level) {
  static z_stream streams[10];
  static bool ready[10] = {};
  z_stream& zs = streams[level];
  if (!ready[level] && deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    fuzz::fail("deflateInit2");
  ready[level] = true;
  if (deflateReset(&zs) != Z_OK) fuzz::fail("deflateReset");
  std::string out(deflateBound(&zs, size), '\0');
  zs.next_in = const_cast<Bytef*>(data);
  zs.avail_in = static_cast<uInt>(size);
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) fuzz::fail("deflate");
  out.resize(zs.total_out);
  return out;
}

// The tensor, or an undefined one if the file is rejected with a nabla::Error.
Tensor load(const std::string& bytes) {
  static fuzz::MemFile file;
  Tensor t;
  fuzz::guarded([&] {
    t = data::read_idx(file.write(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  });
  return t;
}

bool same(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a.shape() == b.shape() &&
         std::memcmp(a.data_ptr<int64_t>(), b.data_ptr<int64_t>(),
                     static_cast<size_t>(a.numel()) * sizeof(int64_t)) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t control = data[0], cut_choice = data[1];
  const uint8_t* plain = data + 2;
  const size_t n = size - 2;
  const int level = (control & 1) ? 9 : (control & 2) ? 1 : 0;  // 0: stored blocks
  // Bits 2..7 pick where a second member starts (0: one member).
  const size_t split = n == 0 ? 0 : (control >> 2) % (n + 1);
  const std::string first = gzip(plain, split == 0 ? n : split, level);
  std::string gz = split == 0 ? first : first + gzip(plain + split, n - split, level);

  // Plain bytes that are themselves gzip are read as such; inside gzip they are a bad magic.
  const bool plain_is_gzip = n >= 2 && plain[0] == 0x1f && plain[1] == 0x8b;
  const Tensor from_plain =
      plain_is_gzip ? Tensor() : load(std::string(reinterpret_cast<const char*>(plain), n));
  const Tensor from_gzip = load(gz);
  NABLA_FUZZ_CHECK(same(from_plain, from_gzip), "the gzip file and the plain file disagree");

  // A cut anywhere inside the last member (a member is at least 18 bytes), or one junk byte
  // after the stream, must be rejected.
  const size_t last_start = split == 0 ? 0 : first.size();
  const size_t cut = last_start + 1 + cut_choice % (gz.size() - last_start - 1);
  NABLA_FUZZ_CHECK(!load(gz.substr(0, cut)).defined(), "a cut gzip stream loaded");
  gz += static_cast<char>(cut_choice);
  NABLA_FUZZ_CHECK(!load(gz).defined(), "junk after the gzip stream loaded");
  return 0;
}
