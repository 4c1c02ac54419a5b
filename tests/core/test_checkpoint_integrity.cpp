// Checkpoint integrity: the CRC-32 in "nabla.crc32" covers every byte of the file (header
// included), so no truncation, flipped byte or edit loads silently; files from before checksums,
// from another thread count or another nabla version load with a warning that says so.
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "nabla/core/io/checkpoint.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

// A small checkpoint like a trainer's: two sections, scalars, a generator.
std::string small_checkpoint() {
  Generator g(5);
  io::Checkpoint ck;
  ck.put_section("model", {{"w", randn({4, 3}, g)}, {"b", randn({3}, g, kFloat64)}});
  ck.put_section("optimizer", {{"step", scalar_tensor(3.0, kInt64)}});
  ck.set("step", 20);
  ck.set("lr", 0.01);
  io::save_generator(ck, "dropout", g);
  return ck.serialize();
}

uint64_t header_length(const std::string& bytes) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return n;
}

// Replaces `from` (which must occur once) by `to` of the same length.
std::string edited(std::string bytes, const std::string& from, const std::string& to) {
  REQUIRE(from.size() == to.size());
  const size_t at = bytes.find(from);
  REQUIRE(at != std::string::npos);
  REQUIRE(bytes.find(from, at + 1) == std::string::npos);
  return bytes.replace(at, from.size(), to);
}

// Writes a valid checksum into an edited file.
std::string resealed(std::string bytes) {
  const size_t at = bytes.find("\"nabla.crc32\":\"") + 15;
  return bytes.replace(at, 8, fmt::format("{:08x}", io::checkpoint_checksum(bytes, "test")));
}

}  // namespace

TEST_CASE("Checkpoint integrity: every truncation throws", "[core][io][integrity]") {
  const std::string good = small_checkpoint();
  CHECK_NOTHROW(io::Checkpoint::parse(good, "good"));
  size_t silent = 0;
  for (size_t len = 0; len < good.size(); ++len) {
    try {
      io::Checkpoint::parse(good.substr(0, len), "cut");
      ++silent;
    } catch (const FormatError& e) {
      INFO(e.what());
      CHECK_THAT(e.what(), Contains("cut"));
    }
  }
  INFO(good.size() << " truncations");
  CHECK(silent == 0);
}

TEST_CASE("Checkpoint integrity: 256 of 256 payload byte flips are detected",
          "[core][io][integrity]") {
  const std::string good = small_checkpoint();
  const uint64_t payload_start = 8 + header_length(good);
  const uint64_t payload = good.size() - payload_start;
  REQUIRE(payload >= 64);
  Generator g(42);
  int detected = 0;
  for (uint64_t i = 0; i < 256; ++i) {
    const uint64_t r = g.bits64(i);
    std::string bad = good;
    const size_t at = payload_start + r % payload;
    bad[at] = static_cast<char>(bad[at] ^ static_cast<char>(1 + (r >> 32) % 255));  // != 0
    try {
      io::Checkpoint::parse(bad, "flip");
    } catch (const FormatError& e) {
      ++detected;
      CHECK_THAT(e.what(), Contains("checksum mismatch"));
    }
  }
  CHECK(detected == 256);
}

TEST_CASE("Checkpoint integrity: every header byte flip and header edit is detected",
          "[core][io][integrity]") {
  const std::string good = small_checkpoint();
  const uint64_t header_end = 8 + header_length(good);
  Generator g(7);
  uint64_t detected = 0;
  for (uint64_t at = 0; at < header_end; ++at) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ static_cast<char>(1 + g.bits64(at) % 255));
    try {
      io::Checkpoint::parse(bad, "flip");
    } catch (const FormatError&) {
      ++detected;
    }
  }
  CHECK(detected == header_end);

  // Edits that keep the JSON valid: a renamed tensor, a changed scalar, a changed shape.
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"\"model.w\"", "\"model.v\""},
      {"\"int:20\"", "\"int:21\""},
      {"[4,3]", "[3,4]"},
      {"\"nabla.format\":\"checkpoint/2\"", "\"nabla.format\":\"checkpoint/1\""},
  };
  for (const auto& [from, to] : edits) {
    INFO(from << " -> " << to);
    const std::string bad = edited(good, from, to);
    CHECK_THROWS_WITH(io::Checkpoint::parse(bad, "edit"),
                      Contains("edit") && Contains("checksum mismatch"));
    // Resealed, the same edit loads: it was the checksum, not another rule, that caught it.
    CHECK_NOTHROW(io::Checkpoint::parse(resealed(bad), "edit"));
  }
  CHECK_THROWS_WITH(io::Checkpoint::parse(edited(good, "\"nabla.crc32\"", "\"nabla.crc33\""), "e"),
                    Contains("without its checksum"));
}

TEST_CASE("Checkpoint integrity: files without a checksum", "[core][io][integrity]") {
  io::Metadata meta = {{"nabla.format", "checkpoint/1"}, {"nabla.sections", "model"}};
  const std::string old = io::serialize_safetensors({{"model.w", ones({2})}}, meta);
  // Written before checksums: loads, with a warning that it was not verified.
  io::Checkpoint ck = io::Checkpoint::parse(old, "old.st");
  CHECK(ck.section("model").size() == 1);
  REQUIRE(ck.warnings().size() == 1);
  CHECK_THAT(ck.warnings()[0], Contains("old.st") && Contains("unverified"));
  // A current-format file without its checksum is refused.
  meta["nabla.format"] = "checkpoint/2";
  CHECK_THROWS_WITH(io::Checkpoint::parse(io::serialize_safetensors({}, meta), "new.st"),
                    Contains("new.st") && Contains("without its checksum"));
  // A checksum field twice (hand-made) is refused rather than half-checked.
  meta["nabla.crc32"] = "00000000";
  std::string twice = io::serialize_safetensors({}, meta);
  twice = edited(twice, "\"nabla.sections\":\"model\"", "\"nabla.crc32\":\"00000000\"");
  CHECK_THROWS_WITH(io::Checkpoint::parse(twice, "twice.st"),
                    Contains("twice.st") && Contains("appears 2 times"));
  // A file saved now loads without warnings.
  CHECK(io::Checkpoint::parse(small_checkpoint(), "now").warnings().empty());
}

TEST_CASE("Checkpoint: another thread count or version is reported when loaded",
          "[core][io][integrity]") {
  const std::string good = small_checkpoint();
  const std::string threads = fmt::format("\"nabla.threads\":\"{}\"", num_threads());
  std::string other = std::to_string(num_threads());  // another count of the same length
  other.back() = other.back() == '9' ? '8' : static_cast<char>(other.back() + 1);
  io::Checkpoint ck = io::Checkpoint::parse(
      resealed(edited(good, threads, fmt::format("\"nabla.threads\":\"{}\"", other))), "t.st");
  REQUIRE(ck.warnings().size() == 1);
  CHECK_THAT(ck.warnings()[0], Contains("t.st") && Contains(fmt::format("{} threads", other)) &&
                                   Contains("not bit for bit"));

  const std::string version = fmt::format("\"nabla.version\":\"{}\"", io::nabla_version());
  std::string older = version;
  older[older.size() - 2] = older[older.size() - 2] == '9' ? '8' : '9';  // same length
  io::Checkpoint v = io::Checkpoint::parse(resealed(edited(good, version, older)), "v.st");
  REQUIRE(v.warnings().size() == 1);
  CHECK_THAT(v.warnings()[0],
             Contains("v.st") && Contains("written by nabla") && Contains(io::nabla_version()));

  CHECK_THROWS_WITH(
      io::Checkpoint::parse(resealed(edited(good, threads, "\"nabla.threads\":\"x\"")), "bad.st"),
      Contains("bad.st") && Contains("not a thread count"));
}

TEST_CASE("Checkpoint::load of a directory is an IOError saying so", "[core][io][integrity]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("nabla_ckpt_dir_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  CHECK_THROWS_AS(io::Checkpoint::load(dir.string()), IOError);
  CHECK_THROWS_WITH(io::Checkpoint::load(dir.string()),
                    Contains(dir.string()) && Contains("is a directory"));
  CHECK_THROWS_WITH(io::load_safetensors(dir.string()), Contains("is a directory"));
  std::filesystem::remove(dir);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
