// safetensors: bit-exact round trips, and strict rejection of malformed files (each error is a
// FormatError that names the problem).
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "nabla/core/io/checkpoint.h"
#include "nabla/core/io/safetensors.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

std::string header_file(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  return out + json + data;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("nabla_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

}  // namespace

TEST_CASE("safetensors round trip is bit-exact for every dtype", "[core][io]") {
  Generator g(3);
  io::NamedTensors in = {
      {"f32", randn({3, 4}, g)},           {"f64", randn({2, 5}, g, kFloat64)},
      {"i64", randint(-100, 100, {7}, g)}, {"b", gt(randn({2, 2}, g), 0.0)},
      {"scalar", scalar_tensor(1.5)},      {"empty", zeros({0, 3})},
      {"view", randn({4, 3}, g).t()},  // non-contiguous: saved as its logical contents
  };
  const std::string path = temp_path("roundtrip.safetensors");
  io::save_safetensors(path, in, {{"step", "12"}});
  io::SafetensorsFile f = io::load_safetensors(path);
  CHECK(f.metadata.at("step") == "12");
  REQUIRE(f.tensors.size() == in.size());
  for (const auto& [name, t] : in) {
    INFO(name);
    const Tensor& back = f.at(name);
    CHECK(back.dtype() == t.dtype());
    CHECK(back.shape() == t.shape());
    Tensor a = t.contiguous(), b = back.contiguous();
    CHECK(std::memcmp(static_cast<char*>(a.storage()->data()) +
                          a.offset() * static_cast<int64_t>(dtype_size(a.dtype())),
                      b.storage()->data(),
                      static_cast<size_t>(a.numel()) * dtype_size(a.dtype())) == 0);
  }
  std::filesystem::remove(path);
  CHECK_THROWS_WITH(f.at("nope"), Contains("nope"));
}

TEST_CASE("atomic_write replaces the file and leaves no temp file behind", "[core][io]") {
  const std::string path = temp_path("atomic.safetensors");
  io::save_safetensors(path, {{"a", ones({2})}});
  io::save_safetensors(path, {{"a", zeros({3})}});
  CHECK(io::load_safetensors(path).at("a").shape() == Shape{3});
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    CHECK(e.path().string().find(path + ".tmp") == std::string::npos);
  std::filesystem::remove(path);
  CHECK_THROWS_AS(io::save_safetensors("/nonexistent-dir/x.safetensors", {{"a", ones({1})}}),
                  IOError);
  CHECK_THROWS_WITH(io::load_safetensors("/nonexistent-dir/x.safetensors"),
                    Contains("/nonexistent-dir/x.safetensors"));
}

TEST_CASE("malformed safetensors files are rejected with a FormatError naming the problem",
          "[core][io]") {
  const std::string good = io::serialize_safetensors({{"w", ones({2, 2})}, {"b", ones({2})}});
  const std::string d16(16, '\0'), d8(8, '\0');
  struct Case {
    const char* what;
    std::string bytes;
    const char* expect;
  };
  std::string huge(8, '\0');
  uint64_t big = 1ull << 40;
  std::memcpy(huge.data(), &big, 8);
  std::string past(8, '\0');
  uint64_t n100 = 100;
  std::memcpy(past.data(), &n100, 8);
  past += "{}";
  const std::vector<Case> cases = {
      {"empty file", "", "too short"},
      {"truncated length", good.substr(0, 5), "too short"},
      {"huge header length", huge + "{}", "exceeds"},
      {"header past end", past, "past the end"},
      {"truncated header", good.substr(0, 20), "past the end"},
      {"truncated data", good.substr(0, good.size() - 3), "past the end"},
      {"bad JSON", header_file("{\"w\": {", ""), "JSON"},
      {"JSON not an object", header_file("[1, 2]", ""), "not an object"},
      {"entry not an object", header_file("{\"w\": 3}", ""), "needs dtype"},
      {"missing dtype", header_file(R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", d8),
       "needs dtype"},
      {"unknown dtype",
       header_file(R"({"w": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}})", "ab"),
       "unsupported dtype"},
      {"dtype not a string",
       header_file(R"({"w": {"dtype": 5, "shape": [2], "data_offsets": [0, 8]}})", d8),
       "unsupported dtype"},
      {"negative shape",
       header_file(R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", d8),
       "shape entry"},
      {"shape not an array",
       header_file(R"({"w": {"dtype": "F32", "shape": 2, "data_offsets": [0, 8]}})", d8),
       "not an array"},
      {"shape overflow",
       header_file(
           R"({"w": {"dtype": "F64", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 8]}})",
           d8),
       "overflow"},
      {"byte count mismatch",
       header_file(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", d8),
       "needs 12"},
      {"offsets reversed",
       header_file(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", d8),
       "reversed"},
      {"offsets out of range",
       header_file(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", d8),
       "past the end"},
      {"offsets malformed",
       header_file(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", d8),
       "two non-negative"},
      {"overlapping tensors",
       header_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                   std::string(12, '\0')),
       "overlaps"},
      {"hole in data",
       header_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})", d16),
       "belong to no tensor"},
      {"trailing bytes",
       header_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", d16),
       "belong to no tensor"},
      {"metadata not strings", header_file(R"({"__metadata__": {"k": 1}})", ""), "not a string"},
      {"invalid bool byte",
       header_file(R"({"m": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}})",
                   std::string("\x01\x07", 2)),
       "not a valid bool"},
  };
  CHECK(cases.size() >= 20);
  for (const Case& c : cases) {
    INFO(c.what);
    CHECK_THROWS_AS(io::parse_safetensors(c.bytes, "bad.safetensors"), FormatError);
    CHECK_THROWS_WITH(io::parse_safetensors(c.bytes, "bad.safetensors"),
                      Contains("bad.safetensors") && Contains(c.expect));
  }
  // Every truncation of a valid file is rejected cleanly.
  for (size_t len = 0; len < good.size(); ++len)
    CHECK_THROWS_AS(io::parse_safetensors(good.substr(0, len), "t.safetensors"), FormatError);
  CHECK_NOTHROW(io::parse_safetensors(good, "good.safetensors"));
}

// Found by fuzzing (issue 17): each escaped as a non-nabla exception, overflowed the stack or
// loaded with wrapped strides. Each must be a FormatError naming the file and the place.
TEST_CASE("safetensors: numbers no double holds, deep nesting, unrepresentable shapes",
          "[core][io][probe]") {
  auto parse = [](const std::string& bytes) { return io::parse_safetensors(bytes, "fz.st"); };
  // 19 bytes: nlohmann reports 1e400 as out_of_range, not parse_error.
  const std::string overflow = header_file("{\"a\":1e400}", "");
  REQUIRE(overflow.size() == 19);
  CHECK_THROWS_AS(parse(overflow), FormatError);
  CHECK_THROWS_WITH(parse(overflow),
                    Contains("fz.st") && Contains("1e400") && Contains("file offset"));
  CHECK_THROWS_AS(io::Checkpoint::parse(overflow, "fz.st"), FormatError);
  CHECK_THROWS_AS(parse(header_file(R"({"w": {"dtype": "F32", "shape": [-1e999],
                                            "data_offsets": [0, 0]}})",
                                    "")),
                  FormatError);
  const std::string path = temp_path("overflow.safetensors");
  { std::ofstream(path, std::ios::binary) << overflow; }
  CHECK_THROWS_WITH(io::load_safetensors(path), Contains(path) && Contains("1e400"));
  CHECK_THROWS_WITH(io::Checkpoint::load(path), Contains(path) && Contains("1e400"));
  std::filesystem::remove(path);

  // Nesting: 100k levels are rejected before any recursion; 64 are parsed (and then rejected
  // for what they are); brackets inside strings do not count.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK_THROWS_WITH(parse(header_file(deep, "")),
                    Contains("fz.st") && Contains("deeper than 64") && Contains("file offset 72"));
  CHECK_THROWS_WITH(parse(header_file("{\"x\":" + std::string(100000, '{'), "")),
                    Contains("deeper than 64"));
  const std::string nested63 = "{\"x\":" + std::string(63, '[') + std::string(63, ']') + "}";
  CHECK_THROWS_WITH(parse(header_file(nested63, "")), Contains("'x'") && Contains("needs dtype"));
  const std::string in_string =
      "{\"__metadata__\":{\"k\":\"" + std::string(1000, '[') + std::string(1000, '{') + "\"}}";
  CHECK(parse(header_file(in_string, "")).metadata.at("k").size() == 2000);

  // A 0 beside huge dims holds no bytes, but its strides do not fit in int64.
  for (const char* shape :
       {"[0, 3221225511, 3921674336]", "[0, 4611686018427387904, 4611686018427387904]"}) {
    INFO(shape);
    const std::string bytes = header_file(
        fmt::format(R"({{"w": {{"dtype": "F32", "shape": {}, "data_offsets": [0, 0]}}}})", shape),
        "");
    CHECK_THROWS_AS(parse(bytes), FormatError);
    CHECK_THROWS_WITH(parse(bytes), Contains("fz.st") && Contains("'w'") && Contains("stride"));
  }
  // A long value is cut short in the message.
  const std::string long_dtype = R"({"w": {"dtype": ")" + std::string(100000, 'x') +
                                 R"(", "shape": [], "data_offsets": [0, 0]}})";
  try {
    parse(header_file(long_dtype, ""));
    FAIL("accepted");
  } catch (const FormatError& e) {
    CHECK(std::string(e.what()).size() < 300);
  }
}

// Found by fuzzing (tests/fuzz/fuzz_safetensors.cpp): a name or metadata string that is not UTF-8
// escaped the writer as nlohmann::type_error. JSON holds only UTF-8, so the writer refuses it
// with a ValueError naming the string (its bytes escaped); valid UTF-8 of any script round-trips.
TEST_CASE("safetensors writer: strings that are not UTF-8 are a ValueError naming them",
          "[core][io][fuzz]") {
  const std::string lone_continuation = "\x84w", cut_sequence = "caf\xc3";
  CHECK_THROWS_AS(io::serialize_safetensors({{lone_continuation, ones({2})}}), ValueError);
  CHECK_THROWS_WITH(io::serialize_safetensors({{lone_continuation, ones({2})}}),
                    Contains("tensor name") && Contains("\\x84w") && Contains("UTF-8"));
  CHECK_THROWS_WITH(io::serialize_safetensors({}, {{cut_sequence, "v"}}),
                    Contains("metadata key") && Contains("caf\\xc3"));
  CHECK_THROWS_WITH(io::serialize_safetensors({}, {{"k", "\xff\xfe"}}),
                    Contains("value of metadata key 'k'") && Contains("\\xff\\xfe"));
  CHECK_THROWS_AS(io::save_safetensors(temp_path("never.safetensors"), {{"\xc0\xaf", ones({1})}}),
                  ValueError);
  // Through a checkpoint: a string scalar, a key, a tensor name.
  io::Checkpoint ck;
  ck.set("note", std::string("\xed\xa0\x80"));  // a UTF-16 surrogate encoded as UTF-8
  CHECK_THROWS_AS(ck.serialize(), ValueError);
  io::Checkpoint keyed;
  keyed.set(std::string("k\xff"), 1);
  CHECK_THROWS_AS(keyed.serialize(), ValueError);
  io::Checkpoint named;
  named.put_section("model", {{"w\xfe", ones({1})}});
  CHECK_THROWS_WITH(named.serialize(), Contains("model.w\\xfe"));
  // Valid UTF-8 round-trips, escapes and all.
  const std::string text = "gr\xc3\xbc\xc3\x9f \xd0\xbf\xd1\x80\xd0\xb8 \xf0\x9f\x98\x80 \"\\\n";
  const io::SafetensorsFile back = io::parse_safetensors(
      io::serialize_safetensors({{text, ones({1})}}, {{text, text}}), "utf8.safetensors");
  CHECK(back.tensors.at(0).first == text);
  CHECK(back.metadata.at(text) == text);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
