// libFuzzer target: io::parse_safetensors on arbitrary bytes. Bad bytes must be a nabla::Error;
// a file that parses must survive a round trip (serialize, parse again) bit for bit. The same
// bytes also become a tensor name and a metadata value for the writer, which must either refuse
// them with a nabla::Error or write a file that reads back to exactly those strings.
#include <cstring>

#include "nabla/core/io/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

using namespace nabla;

namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const size_t n = static_cast<size_t>(a.numel()) * dtype_size(a.dtype());
  return n == 0 || std::memcmp(a.storage()->data(), b.storage()->data(), n) == 0;
}

void check_round_trip(const io::SafetensorsFile& f) {
  for (const auto& [name, t] : f.tensors) {
    NABLA_FUZZ_CHECK(t.is_contiguous() && t.offset() == 0, name);
    NABLA_FUZZ_CHECK(
        static_cast<size_t>(t.numel()) * dtype_size(t.dtype()) <= t.storage()->nbytes(), name);
  }
  const io::SafetensorsFile g =
      io::parse_safetensors(io::serialize_safetensors(f.tensors, f.metadata), "again");
  NABLA_FUZZ_CHECK(g.metadata == f.metadata, "metadata changed in a round trip");
  NABLA_FUZZ_CHECK(g.tensors.size() == f.tensors.size(), "tensor count changed in a round trip");
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    NABLA_FUZZ_CHECK(g.tensors[i].first == f.tensors[i].first, f.tensors[i].first);
    NABLA_FUZZ_CHECK(same_bytes(g.tensors[i].second, f.tensors[i].second), f.tensors[i].first);
  }
}

// Arbitrary strings (any bytes, invalid UTF-8 included) as a tensor name, metadata key and value.
void check_writer_strings(const std::string& bytes) {
  const size_t cut = bytes.size() / 2;
  const std::string name = bytes.substr(0, cut), value = bytes.substr(cut);
  const io::NamedTensors tensors = {{name, ones({2})}};
  const io::Metadata meta = {{value, name}, {"k", value}};
  const std::string file = io::serialize_safetensors(tensors, meta);
  const io::SafetensorsFile back = io::parse_safetensors(file, "written");
  NABLA_FUZZ_CHECK(back.tensors.size() == 1 && back.tensors[0].first == name,
                   "a tensor name did not read back");
  NABLA_FUZZ_CHECK(back.metadata == meta, "metadata did not read back");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  fuzz::guarded([&] { check_round_trip(io::parse_safetensors(bytes, "fuzz.safetensors")); });
  fuzz::guarded([&] { check_writer_strings(bytes); });
  return 0;
}
