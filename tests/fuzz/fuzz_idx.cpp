// libFuzzer target: data::read_idx on arbitrary file contents, plain or gzip (the reader decides
// by the magic bytes 1f 8b). Bad bytes must be a nabla::Error. A plain file that loads must hold
// exactly what its bytes say: the header's dims as the shape and every data byte as one value.
#include "nabla/data/idx.h"
#include "tests/fuzz/fuzz_common.h"

using namespace nabla;

namespace {

void check(const uint8_t* data, size_t size) {
  static fuzz::MemFile file;
  const Tensor t = data::read_idx(file.write(data, size));
  NABLA_FUZZ_CHECK(t.dtype() == kInt64 && t.dim() >= 1 && t.dim() <= 4, shape_str(t.shape()));
  const bool gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  const int64_t* values = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i)
    NABLA_FUZZ_CHECK(values[i] >= 0 && values[i] <= 255, "a value is not a byte");
  if (gzip) return;
  const size_t header = 4 + 4 * static_cast<size_t>(t.dim());
  NABLA_FUZZ_CHECK(size == header + static_cast<size_t>(t.numel()), "size does not match");
  NABLA_FUZZ_CHECK(data[0] == 0 && data[1] == 0 && data[2] == 8 && data[3] == t.dim(), "magic");
  for (int64_t d = 0; d < t.dim(); ++d) {
    const uint8_t* p = data + 4 + 4 * d;
    const int64_t n = (int64_t{p[0]} << 24) | (int64_t{p[1]} << 16) | (int64_t{p[2]} << 8) | p[3];
    NABLA_FUZZ_CHECK(t.size(d) == n, "dim " + std::to_string(d));
  }
  for (int64_t i = 0; i < t.numel(); ++i)
    NABLA_FUZZ_CHECK(values[i] == data[header + static_cast<size_t>(i)], "a value changed");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::guarded([&] { check(data, size); });
}
