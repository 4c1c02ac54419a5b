// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/): valid files made by
// nabla's own writers, and every malformed-file case of the unit tests (test_safetensors.cpp,
// test_checkpoint*.cpp, test_data.cpp, test_idx_limits.cpp), cut down where a case is large
// (100k-level nesting becomes 100 levels): the fuzzer grows them back. Run by
// `scripts/fuzz.sh --make-corpus`; the output is committed.
#include <fmt/format.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "nabla/core/io/checkpoint.h"
#include "nabla/core/io/safetensors.h"
#include "nabla/core/parallel.h"

using namespace nabla;
namespace fs = std::filesystem;

namespace {

fs::path root;

void put(const std::string& target, const std::string& name, const std::string& bytes) {
  const fs::path dir = root / target;
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary | std::ios::trunc) << bytes;
}

std::string header_file(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  return out + json + data;
}

std::string idx_bytes(const std::vector<uint32_t>& dims, size_t payload) {
  std::string s = {0, 0, 8, static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int k = 3; k >= 0; --k) s += static_cast<char>((d >> (8 * k)) & 0xFF);
  for (size_t i = 0; i < payload; ++i) s += static_cast<char>(i % 251);
  return s;
}

std::string gzip(const std::string& bytes, int level = 9) {
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::string out(deflateBound(&zs, bytes.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(bytes.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string sealed_file(io::Metadata meta, const io::NamedTensors& tensors = {}) {
  meta["nabla.crc32"] = "00000000";
  std::string bytes = io::serialize_safetensors(tensors, meta);
  const size_t at = bytes.find("\"nabla.crc32\":\"") + 15;
  bytes.replace(at, 8, fmt::format("{:08x}", io::checkpoint_checksum(bytes, "corpus")));
  return bytes;
}

std::string small_checkpoint() {
  Generator g(5);
  io::Checkpoint ck;
  ck.put_section("model", {{"w", randn({4, 3}, g)}, {"b", randn({3}, g, kFloat64)}});
  ck.put_section("optimizer", {{"step", scalar_tensor(3.0, kInt64)}});
  ck.put_section("empty", {});
  ck.set("step", 20);
  ck.set("lr", 0.01);
  ck.set("seed", uint64_t{18446744073709551615u});
  ck.set("note", "str with: colon, comma");
  io::save_generator(ck, "dropout", g);
  io::save_loader_position(ck, "train", {2, 7});
  return ck.serialize();
}

void safetensors_corpus() {
  const std::string t = "safetensors";
  Generator g(1);
  put(t, "valid-all-dtypes",
      io::serialize_safetensors({{"f32", randn({2, 2}, g)},
                                 {"f64", randn({3}, g, kFloat64)},
                                 {"i64", randint(-100, 100, {2}, g)},
                                 {"b", tensor({1, 0}).to(kBool)},
                                 {"scalar", scalar_tensor(1.5)},
                                 {"empty", zeros({0, 3})}},
                                {{"step", "12"}}));
  put(t, "valid-checkpoint", small_checkpoint());
  const std::string good = io::serialize_safetensors({{"w", ones({2, 2})}, {"b", ones({2})}});
  const std::string d16(16, '\0'), d8(8, '\0');
  std::string huge(8, '\0');
  const uint64_t big = 1ull << 40;
  std::memcpy(huge.data(), &big, 8);
  std::string past(8, '\0');
  const uint64_t n100 = 100;
  std::memcpy(past.data(), &n100, 8);
  past += "{}";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty-file", ""},
      {"truncated-length", good.substr(0, 5)},
      {"huge-header-length", huge + "{}"},
      {"header-past-end", past},
      {"truncated-header", good.substr(0, 20)},
      {"truncated-data", good.substr(0, good.size() - 3)},
      {"bad-json", header_file("{\"w\": {", "")},
      {"json-not-object", header_file("[1, 2]", "")},
      {"entry-not-object", header_file("{\"w\": 3}", "")},
      {"missing-dtype", header_file(R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", d8)},
      {"unknown-dtype",
       header_file(R"({"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}})", "abcd")},
      {"dtype-not-string",
       header_file(R"({"w": {"dtype": 5, "shape": [2], "data_offsets": [0, 8]}})", d8)},
      {"negative-shape",
       header_file(R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", d8)},
      {"shape-not-array",
       header_file(R"({"w": {"dtype": "F32", "shape": 2, "data_offsets": [0, 8]}})", d8)},
      {"shape-overflow",
       header_file(
           R"({"w": {"dtype": "F64", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 8]}})",
           d8)},
      {"byte-count-mismatch",
       header_file(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", d8)},
      {"offsets-reversed",
       header_file(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", d8)},
      {"offsets-out-of-range",
       header_file(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", d8)},
      {"offsets-malformed",
       header_file(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", d8)},
      {"overlapping-tensors",
       header_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                       "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                   std::string(12, '\0'))},
      {"hole-in-data",
       header_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})", d16)},
      {"trailing-bytes",
       header_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", d16)},
      {"metadata-not-strings", header_file(R"({"__metadata__": {"k": 1}})", "")},
      {"invalid-bool-byte",
       header_file(R"({"m": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}})",
                   std::string("\x01\x07", 2))},
      // Issue 17's probe findings, small.
      {"number-no-double-holds", header_file("{\"a\":1e400}", "")},
      {"shape-minus-1e999",
       header_file(R"({"w": {"dtype": "F32", "shape": [-1e999], "data_offsets": [0, 0]}})", "")},
      {"nested-100-arrays", header_file(std::string(100, '[') + std::string(100, ']'), "")},
      {"nested-100-open-objects", header_file("{\"x\":" + std::string(100, '{'), "")},
      {"nested-63", header_file("{\"x\":" + std::string(63, '[') + std::string(63, ']') + "}", "")},
      {"brackets-in-string", header_file("{\"__metadata__\":{\"k\":\"" + std::string(100, '[') +
                                             std::string(100, '{') + "\"}}",
                                         "")},
      {"zero-beside-huge-dims",
       header_file(
           R"({"w": {"dtype": "F32", "shape": [0, 3221225511, 3921674336], "data_offsets": [0, 0]}})",
           "")},
      {"zero-beside-2-62",
       header_file(
           R"({"w": {"dtype": "F32", "shape": [0, 4611686018427387904, 4611686018427387904], "data_offsets": [0, 0]}})",
           "")},
      {"long-dtype", header_file(R"({"w": {"dtype": ")" + std::string(200, 'x') +
                                     R"(", "shape": [], "data_offsets": [0, 0]}})",
                                 "")},
      {"declares-2-40-elements",
       header_file(R"({"w": {"dtype": "F32", "shape": [1099511627776], "data_offsets": [0, 8]}})",
                   d8)},
      {"escapes-and-unicode",
       header_file(
           R"({"\u00e9\ud83d\ude00\n": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})",
           d8)},
  };
  for (const auto& [name, bytes] : cases) put(t, name, bytes);
}

void checkpoint_corpus() {
  const std::string t = "checkpoint";
  put(t, "valid", small_checkpoint());
  const io::Metadata ok = {{"nabla.format", "checkpoint/2"}, {"nabla.sections", "model"}};
  auto with = [&](const std::string& key, const std::string& value) {
    io::Metadata m = ok;
    m[key] = value;
    return m;
  };
  const io::NamedTensors w = {{"model.w", ones({2})}};
  put(t, "valid-hand-made", sealed_file(ok, w));
  put(t, "not-a-checkpoint", sealed_file({}, {{"w", ones({2})}}));
  put(t, "format-3", sealed_file(with("nabla.format", "checkpoint/3")));
  put(t, "no-sections", sealed_file({{"nabla.format", "checkpoint/2"}}));
  put(t, "empty-section-name", sealed_file(with("nabla.sections", "model,,opt")));
  put(t, "section-twice", sealed_file(with("nabla.sections", "model,model")));
  put(t, "unknown-reserved-key", sealed_file(with("nabla.extra", "1")));
  put(t, "tensor-outside-sections", sealed_file(ok, {{"optimizer.x", ones({1})}}));
  put(t, "tensor-named-as-section", sealed_file(ok, {{"model", ones({1})}}));
  put(t, "tensor-name-ends-with-dot", sealed_file(ok, {{"model.", ones({1})}}));
  const std::vector<std::pair<std::string, std::string>> scalars = {
      {"step", "20"},
      {"step", "i64:20"},
      {"step", "int:20x"},
      {"step", "int:99999999999999999999"},
      {"step", "int:+3"},
      {"step", "int:"},
      {"seed", "uint:-1"},
      {"seed", "uint:"},
      {"lr", "float:0.1.2"},
      {"lr", "float: 1"},
      {"lr", "float:1e-3"},
      {"s", "str:"},
      {"lr", "float:nan"},
      {"lr", "float:-inf"},
      {"lr", "float:-0"},
      {"lr", "float:1e400"},
      {"n", "int:-9223372036854775808"},
      {"generator.g.seed", "uint:18446744073709551615"},
      {"loader.l.epoch", "int:-1"}};
  for (size_t i = 0; i < scalars.size(); ++i)
    put(t, fmt::format("scalar-{:02}", i), sealed_file(with(scalars[i].first, scalars[i].second)));
  put(t, "threads-0", sealed_file(with("nabla.threads", "0")));
  put(t, "threads-3", sealed_file(with("nabla.threads", "3")));
  put(t, "other-version", sealed_file(with("nabla.version", "0.0.1")));
  std::string cut = sealed_file(ok, w);
  cut.resize(cut.size() - 1);
  put(t, "truncated", cut);
  io::Metadata old = {{"nabla.format", "checkpoint/1"}, {"nabla.sections", "model"}};
  put(t, "before-checksums", io::serialize_safetensors(w, old));
  old["nabla.format"] = "checkpoint/2";
  put(t, "without-checksum", io::serialize_safetensors({}, old));
  old["nabla.crc32"] = "00000000";
  std::string twice = io::serialize_safetensors({}, old);
  const std::string from = "\"nabla.sections\":\"model\"";
  twice.replace(twice.find(from), from.size(), "\"nabla.crc32\":\"00000000\"");
  put(t, "checksum-twice", twice);
  std::string flipped = small_checkpoint();
  flipped[flipped.size() - 5] = static_cast<char>(flipped[flipped.size() - 5] ^ 0x10);
  put(t, "payload-flip", flipped);
}

void idx_corpus() {
  const std::string t = "idx";
  const std::string raw = idx_bytes({3, 4}, 12), gz = gzip(raw);
  put(t, "valid-2d", raw);
  put(t, "valid-1d", idx_bytes({10}, 10));
  put(t, "valid-4d", idx_bytes({1, 2, 2, 2}, 8));
  put(t, "valid-empty", idx_bytes({0, 28, 28}, 0));
  put(t, "valid-gzip", gz);
  put(t, "valid-gzip-empty", gzip(idx_bytes({0, 28, 28}, 0)));
  put(t, "valid-gzip-stored", gzip(raw, 0));
  put(t, "valid-gzip-two-members", gzip(raw.substr(0, 7)) + gzip(raw.substr(7)));
  put(t, "gzip-truncated-data", gzip(idx_bytes({2, 3}, 5)));
  std::string bad = idx_bytes({2}, 2);
  bad[2] = 0x0D;
  put(t, "bad-magic", bad);
  put(t, "bad-magic-gzip", gzip(bad));
  put(t, "ndims-0", idx_bytes({}, 0));
  put(t, "ndims-5", idx_bytes({1, 1, 1, 1, 1}, 1));
  put(t, "header-truncated-gzip", gzip(idx_bytes({2, 3}, 0).substr(0, 9)));
  const std::string hundred = gzip(idx_bytes({100}, 100));
  put(t, "gzip-cut-in-half", hundred.substr(0, hundred.size() / 2));
  const std::vector<std::vector<uint32_t>> dims = {
      {0, 3221225511u, 3921674336u}, {65536, 65536, 65536, 65536}, {4294967295u, 4294967295u, 0}};
  for (size_t i = 0; i < dims.size(); ++i) {
    put(t, fmt::format("dims-overflow-{}", i), idx_bytes(dims[i], 0));
    put(t, fmt::format("dims-overflow-{}-gzip", i), gzip(idx_bytes(dims[i], 0)));
  }
  put(t, "declares-64-gib-gzip", gzip(idx_bytes({65536, 65536, 16}, 16)));
  put(t, "gzip-cut-in-trailer", gz.substr(0, gz.size() - 4));
  put(t, "gzip-cut-before-trailer", gz.substr(0, gz.size() - 8));
  put(t, "gzip-junk-nul", gz + std::string("\0", 1));
  put(t, "gzip-junk-text", gz + "junk");
  put(t, "gzip-junk-half-magic", gz + "\x1f");
  std::string bad_crc = gz;
  bad_crc[bad_crc.size() - 6] = static_cast<char>(bad_crc[bad_crc.size() - 6] ^ 0x40);
  put(t, "gzip-bad-crc", bad_crc);
  put(t, "plain-padded", raw + "x");
  put(t, "plain-truncated", raw.substr(0, raw.size() - 1));

  // The structure-aware gzip target: two control bytes, then the plain file.
  const std::string g = "idx_gzip";
  const std::vector<std::pair<std::string, std::string>> plain = {
      {"2d", raw},
      {"1d", idx_bytes({10}, 10)},
      {"empty", idx_bytes({0, 28, 28}, 0)},
      {"truncated", idx_bytes({2, 3}, 5)},
      {"padded", raw + "x"},
      {"bad-magic", bad},
      {"header-truncated", idx_bytes({2, 3}, 0).substr(0, 9)},
      {"dims-overflow", idx_bytes(dims[0], 0)},
      {"dims-wrap", idx_bytes(dims[1], 0)},
  };
  const std::vector<std::pair<std::string, std::string>> controls = {
      {"one-member-l9", std::string("\x01\x00", 2)},
      {"one-member-stored", std::string("\x00\x07", 2)},
      {"two-members-l1", std::string("\x16\x30", 2)},
  };
  for (const auto& [pname, bytes] : plain)
    for (const auto& [cname, control] : controls) put(g, pname + "-" + cname, control + bytes);
}

void text_corpus() {
  const std::string f = "fortune";
  put(f, "unit-test-sample",
      "First  entry\nspans lines.\n\t\t-- Someone Famous\n%\n\x1b[1mBold\x1b[0m text\n%\n%\n"
      "Last one\n");
  put(f, "crlf-and-dash", "Windows line\r\nends\r\n%\r\n\xe2\x80\x94 Attributed\r\nNext\r\n");
  put(f, "overstrike-and-escapes",
      "B\bBo\bol\bld\bd and _\bu_\bn\n%\n\x1b(0box\x1b(B \x1b[31;1mred\x1b[m\n%\nunfinished "
      "\x1b[");
  put(f, "languages",
      "Wer andern eine Grube gr\xc3\xa4"
      "bt, f\xc3\xa4llt selbst hinein.\n%\n"
      "\xd0\x9f\xd0\xbe\xd0\xb2\xd1\x82\xd0\xbe\xd1\x80\xd0\xb5\xd0\xbd\xd0\xb8\xd0\xb5 "
      "\xe2\x80\x94 "
      "\xd0\xbc\xd0\xb0\xd1\x82\xd1\x8c \xd1\x83\xd1\x87\xd0\xb5\xd0\xbd\xd0\xb8\xd1\x8f.\n%\n"
      "Latin-1 bytes: caf\xe9 na\xefve\n%\n   \n\t\n%\n--\n-- only attribution\n");
  put(f, "empty", "");
  put(f, "only-separators", "%\n%\n%\n");
  put(f, "no-trailing-newline", "one\n%\ntwo");

  const std::string k = "tokenizer";
  put(k, "ascii", "hello world\nthe quick brown fox\n");
  put(k, "utf8-languages",
      "gr\xc3\xbc\xc3\x9f"
      "e\n\xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82\n\xe4\xbd\xa0\xe5\xa5"
      "\xbd\n\xf0\x9f\x98\x80 emoji\n\xc3\xa9\xc3\xa9\xc3\xa9");
  put(k, "invalid-utf8",
      "\xff\xfe lone \xc3 overlong \xc0\xaf surrogate \xed\xa0\x80 cont \x80\x80 end \xf0\x9f\x98");
  put(k, "ids-as-int64",
      std::string("\xff\xff\xff\xff\xff\xff\xff\x7f\x00\x00\x00\x00\x00\x00\x00\x80"
                  "\x05\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff",
                  32));
  put(k, "empty", "");
  put(k, "newlines", "\n\n\na\n\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_make_corpus <corpus dir>\n";
    return 2;
  }
  root = argv[1];
  set_num_threads(1);  // the checkpoints record it
  safetensors_corpus();
  checkpoint_corpus();
  idx_corpus();
  text_corpus();
  for (const auto& dir : fs::directory_iterator(root)) {
    size_t files = 0, bytes = 0;
    for (const auto& f : fs::directory_iterator(dir)) {
      ++files;
      bytes += fs::file_size(f);
    }
    std::cout << fmt::format("{}: {} files, {} bytes\n", dir.path().filename().string(), files,
                             bytes);
  }
}
