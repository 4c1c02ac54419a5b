// IDX files that once loaded silently, inflated without bound or failed without naming the file
// (issue 17's probe): each is now a FormatError or IOError naming the file.
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "nabla/data/idx.h"
#include "nabla/data/text.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using namespace nabla::data;
using Catch::Matchers::Contains;

namespace {

std::string tmp(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("nabla_idx_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string idx_bytes(const std::vector<uint32_t>& dims, size_t payload) {
  std::string s = {0, 0, 8, static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int k = 3; k >= 0; --k) s += static_cast<char>((d >> (8 * k)) & 0xFF);
  for (size_t i = 0; i < payload; ++i) s += static_cast<char>(i % 251);
  return s;
}

// One gzip member holding `bytes`, in memory.
std::string gzip(const std::string& bytes) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, bytes.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(bytes.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace

TEST_CASE("IDX: a gzip file inflating far past its header's size stops at that size",
          "[data][probe]") {
  // 10 declared bytes followed by 256 MiB of zeros: a ~250 KB file. The reader must stop after
  // the header's size plus one byte, long before it has read the whole compressed file.
  const std::string path = tmp("bomb.gz");
  {
    gzFile f = gzopen(path.c_str(), "wb9");
    REQUIRE(f);
    const std::string head = idx_bytes({10}, 10);
    gzwrite(f, head.data(), static_cast<unsigned>(head.size()));
    const std::string zeros(1 << 20, '\0');
    for (int i = 0; i < 256; ++i) gzwrite(f, zeros.data(), static_cast<unsigned>(zeros.size()));
    gzclose(f);
  }
  const auto file_size = std::filesystem::file_size(path);
  CHECK(file_size < (1u << 20));
  try {
    read_idx(path);
    FAIL("accepted");
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg, Contains(path) && Contains("(10,)") && Contains("padded"));
    // "after reading N of the file's M compressed bytes": N is one input buffer, not the file.
    const size_t at = msg.find("after reading ");
    REQUIRE(at != std::string::npos);
    CHECK(std::stoull(msg.substr(at + 14)) <= (uint64_t{1} << 16));
  }
  std::filesystem::remove(path);
}

TEST_CASE("IDX: dims whose product wraps or whose strides overflow name the file",
          "[data][probe]") {
  const std::string path = tmp("dims");
  for (const std::vector<uint32_t>& dims : {std::vector<uint32_t>{0, 3221225511u, 3921674336u},
                                            std::vector<uint32_t>{65536, 65536, 65536, 65536},
                                            std::vector<uint32_t>{4294967295u, 4294967295u, 0}}) {
    for (bool compressed : {false, true}) {
      INFO(dims.size() << " dims, gzip " << compressed);
      const std::string raw = idx_bytes(dims, 0);
      write(path, compressed ? gzip(raw) : raw);
      CHECK_THROWS_AS(read_idx(path), FormatError);
      CHECK_THROWS_WITH(read_idx(path), Contains(path) && Contains("header is corrupt"));
    }
  }
  // A 0 beside small dims is a valid empty file.
  write(path, gzip(idx_bytes({0, 28, 28}, 0)));
  CHECK(read_idx(path).shape() == Shape{0, 28, 28});
  std::filesystem::remove(path);
}

TEST_CASE("IDX: a gzip stream cut before its trailer, or followed by junk, is rejected",
          "[data][probe]") {
  const std::string path = tmp("cut.gz");
  const std::string raw = idx_bytes({3, 4}, 12);
  const std::string gz = gzip(raw);
  // Every cut, including the 8 lengths inside the trailer (CRC-32 and size) and the one just
  // before it, where all of the data is already there.
  for (size_t len = 0; len < gz.size(); ++len) {
    INFO("cut at " << len << " of " << gz.size());
    write(path, gz.substr(0, len));
    CHECK_THROWS_AS(read_idx(path), FormatError);
    CHECK_THROWS_WITH(read_idx(path), Contains(path));
  }
  // Junk after the stream; a corrupt trailer.
  for (const std::string& junk : {std::string("\0", 1), std::string("junk"), std::string("\x1f")}) {
    write(path, gz + junk);
    CHECK_THROWS_WITH(read_idx(path), Contains(path) && Contains("after the gzip stream"));
  }
  std::string bad_crc = gz;
  bad_crc[bad_crc.size() - 6] = static_cast<char>(bad_crc[bad_crc.size() - 6] ^ 0x40);
  write(path, bad_crc);
  CHECK_THROWS_WITH(read_idx(path), Contains(path) && Contains("corrupt gzip data"));
  // Two members (gzip -c a b) are one valid file; a plain file padded or cut is not.
  write(path, gzip(raw.substr(0, 7)) + gzip(raw.substr(7)));
  CHECK(read_idx(path).shape() == Shape{3, 4});
  write(path, gz);
  CHECK(read_idx(path).to_vector<int64_t>()[11] == 11);
  write(path, raw + "x");
  CHECK_THROWS_WITH(read_idx(path), Contains(path) && Contains("padded"));
  write(path, raw.substr(0, raw.size() - 1));
  CHECK_THROWS_WITH(read_idx(path), Contains(path) && Contains("truncated"));
  std::filesystem::remove(path);
}

TEST_CASE("IDX and fortune readers: a directory is an IOError saying so", "[data][probe]") {
  const std::string dir = tmp("dir");
  std::filesystem::create_directories(dir);
  CHECK_THROWS_AS(read_idx(dir), IOError);
  CHECK_THROWS_WITH(read_idx(dir), Contains(dir) && Contains("is a directory"));
  CHECK_THROWS_AS(read_fortune_file(dir), IOError);
  CHECK_THROWS_WITH(read_fortune_file(dir), Contains(dir) && Contains("is a directory"));
  std::filesystem::remove(dir);
  CHECK_THROWS_WITH(read_idx(dir), Contains(dir) && Contains("cannot open"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
