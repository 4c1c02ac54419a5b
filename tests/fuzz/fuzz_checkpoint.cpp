// libFuzzer target: io::Checkpoint::parse on arbitrary bytes. The CRC-32 would reject almost
// every mutation before the checkpoint layer is reached, so an input that has the checksum field
// once is resealed first (as a tool editing a checkpoint on purpose would). Bad bytes must be a
// nabla::Error; a checkpoint that loads must answer every getter with a value or a nabla::Error
// and survive a round trip (serialize, parse again) with the same sections and scalars.
#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "nabla/core/io/checkpoint.h"
#include "tests/fuzz/fuzz_common.h"

using namespace nabla;

namespace {

std::string resealed(std::string bytes) {
  try {
    const uint32_t crc = io::checkpoint_checksum(bytes, "fuzz");
    const std::string field = "\"nabla.crc32\":\"";
    const size_t at = bytes.find(field, 8);  // the one in the header: checkpoint_checksum found it
    if (at != std::string::npos) bytes.replace(at + field.size(), 8, fmt::format("{:08x}", crc));
  } catch (const Error&) {
  }
  return bytes;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const size_t n = static_cast<size_t>(a.numel()) * dtype_size(a.dtype());
  return n == 0 || std::memcmp(a.storage()->data(), b.storage()->data(), n) == 0;
}

bool same_value(const io::Checkpoint& a, const io::Checkpoint& b, const std::string& key) {
  try {
    return a.get_string(key) == b.get_string(key);
  } catch (const Error&) {
  }
  try {
    return a.get_int(key) == b.get_int(key);
  } catch (const Error&) {
  }
  try {
    return a.get_uint(key) == b.get_uint(key);
  } catch (const Error&) {
  }
  return std::bit_cast<uint64_t>(a.get_float(key)) == std::bit_cast<uint64_t>(b.get_float(key));
}

// Every getter on every key: a value or a nabla::Error, nothing else.
void query_everything(const io::Checkpoint& ck) {
  for (const std::string& key : ck.keys()) {
    fuzz::guarded([&] { (void)ck.get_int(key); });
    fuzz::guarded([&] { (void)ck.get_uint(key); });
    fuzz::guarded([&] { (void)ck.get_float(key); });
    fuzz::guarded([&] { (void)ck.get_string(key); });
    for (const char* kind : {"generator.", "loader."}) {
      if (key.rfind(kind, 0) != 0) continue;
      const std::string rest = key.substr(std::strlen(kind));
      const std::string name = rest.substr(0, rest.rfind('.'));
      fuzz::guarded([&] {
        Generator g(0);
        io::load_generator(ck, name, g);
      });
      fuzz::guarded([&] { (void)io::load_loader_position(ck, name); });
    }
  }
}

void check(const std::string& bytes) {
  const io::Checkpoint ck = io::Checkpoint::parse(resealed(bytes), "fuzz.ckpt");
  query_everything(ck);
  const io::Checkpoint again = io::Checkpoint::parse(ck.serialize(), "again");
  NABLA_FUZZ_CHECK(again.section_names() == ck.section_names(), "sections changed");
  for (const std::string& name : ck.section_names()) {
    const io::NamedTensors &a = ck.section(name), &b = again.section(name);
    NABLA_FUZZ_CHECK(a.size() == b.size(), name);
    for (size_t i = 0; i < a.size(); ++i) {
      NABLA_FUZZ_CHECK(a[i].first == b[i].first, a[i].first);
      NABLA_FUZZ_CHECK(same_bytes(a[i].second, b[i].second), a[i].first);
    }
  }
  NABLA_FUZZ_CHECK(again.keys() == ck.keys(), "scalar keys changed");
  for (const std::string& key : ck.keys())
    NABLA_FUZZ_CHECK(same_value(ck, again, key), "scalar '" + key + "' changed");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  fuzz::guarded([&] { check(bytes); });
  return 0;
}
