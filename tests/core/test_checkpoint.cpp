// io::Checkpoint: sections and typed scalars round-trip exactly through one safetensors file;
// loading rejects anything malformed with a FormatError naming the file and the key.
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "nabla/core/io/checkpoint.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

namespace {

std::string temp_path(const std::string& stem) {
  return (std::filesystem::temp_directory_path() /
          (stem + "_" + std::to_string(::getpid()) + ".safetensors"))
      .string();
}

using test::bit_equal;

// A hand-made checkpoint file with the given metadata and tensors (for malformed checkpoints),
// sealed with a valid checksum as Checkpoint::save would seal it.
std::string sealed_file(io::Metadata meta, const io::NamedTensors& tensors = {}) {
  meta["nabla.crc32"] = "00000000";
  std::string bytes = io::serialize_safetensors(tensors, meta);
  const size_t at = bytes.find("\"nabla.crc32\":\"") + 15;
  bytes.replace(at, 8, fmt::format("{:08x}", io::checkpoint_checksum(bytes, "test")));
  return bytes;
}

}  // namespace

TEST_CASE("Checkpoint: sections and scalars round-trip bit for bit", "[core][io]") {
  Generator g(3);
  Tensor w = randn({4, 3}, g), b = randn({3}, g, kFloat64);
  Tensor step = scalar_tensor(7.0, kInt64), mask = from_vector<bool>({true, false, true}, {3});
  Tensor empty_t = zeros({0, 5});

  io::Checkpoint ck;
  ck.put_section("model", {{"0.weight", w}, {"0.bias", b}, {"mask", mask}});
  ck.put_section("optimizer", {{"state.0.step", step}, {"state.0.empty", empty_t}});
  ck.put_section("empty", {});
  ck.set("step", 20);
  ck.set("neg", int64_t{-5});
  ck.set("big", std::numeric_limits<uint64_t>::max());
  ck.set("lr", 0.1);
  ck.set("tiny", 4.9406564584124654e-324);  // the smallest subnormal
  ck.set("negzero", -0.0);
  ck.set("inf", -std::numeric_limits<double>::infinity());
  ck.set("nan", std::nan(""));
  ck.set("note", "resumed from \"run 3\": α=0.1\nline two, with, commas:and colons");
  ck.set("blank", "");

  const std::string path = temp_path("nabla_ckpt");
  ck.save(path);
  io::Checkpoint r = io::Checkpoint::load(path);
  CHECK(r.source() == path);
  CHECK(r.section_names() == std::vector<std::string>{"model", "optimizer", "empty"});
  const io::NamedTensors& m = r.section("model");
  REQUIRE(m.size() == 3);
  CHECK(m[0].first == "0.weight");
  CHECK(m[1].first == "0.bias");
  CHECK(m[2].first == "mask");
  CHECK(bit_equal(m[0].second, w));
  CHECK(bit_equal(m[1].second, b));
  CHECK(bit_equal(m[2].second, mask));
  CHECK(bit_equal(r.section("optimizer")[0].second, step));
  CHECK(r.section("optimizer")[1].second.shape() == Shape{0, 5});
  CHECK(r.section("empty").empty());
  CHECK(r.has_section("model"));
  CHECK_FALSE(r.has_section("scheduler"));

  CHECK(r.get_int("step") == 20);
  CHECK(r.get_int("neg") == -5);
  CHECK(r.get_uint("big") == std::numeric_limits<uint64_t>::max());
  CHECK(r.get_float("lr") == 0.1);
  CHECK(r.get_float("tiny") == 4.9406564584124654e-324);
  CHECK(std::signbit(r.get_float("negzero")));
  CHECK(r.get_float("inf") == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(r.get_float("nan")));
  CHECK(r.get_string("note") == "resumed from \"run 3\": α=0.1\nline two, with, commas:and colons");
  CHECK(r.get_string("blank").empty());
  CHECK(r.keys().size() == 10);
  // Lenient where nothing is lost: an int read as a float or a uint, a small uint as an int.
  CHECK(r.get_float("step") == 20.0);
  CHECK(r.get_uint("step") == 20);
  // Saving what was loaded gives the same bytes.
  CHECK(r.serialize() == ck.serialize());
  ck.set("small", uint64_t{9});
  CHECK(ck.get_int("small") == 9);

  std::filesystem::remove(path);
}

TEST_CASE("Checkpoint: doubles keep every bit", "[core][io]") {
  Generator g(11);
  io::Checkpoint ck;
  std::vector<double> values;
  for (uint64_t i = 0; i < 200; ++i) {
    uint64_t bits = g.bits64(i);
    double d = 0;
    std::memcpy(&d, &bits, sizeof d);
    if (std::isnan(d)) continue;
    values.push_back(d);
    ck.set("v" + std::to_string(i), d);
  }
  io::Checkpoint r = io::Checkpoint::parse(ck.serialize(), "mem");
  size_t k = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    if (!ck.has("v" + std::to_string(i))) continue;
    const double back = r.get_float("v" + std::to_string(i));
    CHECK(std::memcmp(&back, &values[k++], sizeof back) == 0);
  }
  CHECK(k > 150);
}

TEST_CASE("Checkpoint: put_section replaces, keeps handles, validates names", "[core][io]") {
  io::Checkpoint ck;
  Tensor a = zeros({2});
  ck.put_section("model", {{"a", a}});
  a.fill_(3.0);  // handles are kept: save() writes the values at save time
  ck.put_section("opt", {});
  ck.put_section("model", {{"a", a}, {"b", ones({1})}});  // replaces, keeps the position
  CHECK(ck.section_names() == std::vector<std::string>{"model", "opt"});
  io::Checkpoint r = io::Checkpoint::parse(ck.serialize(), "mem");
  CHECK(r.section("model").size() == 2);
  CHECK(r.section("model")[0].second.to_vector<float>() == std::vector<float>{3, 3});

  CHECK_THROWS_WITH(ck.put_section("a.b", {}), Contains("put_section") && Contains("'a.b'"));
  CHECK_THROWS_AS(ck.put_section("", {}), ValueError);
  CHECK_THROWS_AS(ck.put_section("x,y", {}), ValueError);
  CHECK_THROWS_WITH(ck.put_section("s", {{"", a}}), Contains("empty name"));
  CHECK_THROWS_WITH(ck.put_section("s", {{"t", Tensor()}}),
                    Contains("'t'") && Contains("undefined"));
  CHECK_THROWS_WITH(ck.set("nabla.format", 1), Contains("reserved"));
  CHECK_THROWS_AS(ck.set("", 1), ValueError);
  ck.put_section("dup", {{"x", a}, {"x", a}});
  CHECK_THROWS_WITH(ck.serialize(), Contains("duplicate") && Contains("dup.x"));
}

TEST_CASE("Checkpoint: getters name the file and key", "[core][io]") {
  io::Checkpoint ck;
  ck.set("step", -3);
  ck.set("name", "run");
  ck.set("lr", 0.5);
  ck.put_section("model", {});
  const std::string path = temp_path("nabla_ckpt_get");
  ck.save(path);
  io::Checkpoint r = io::Checkpoint::load(path);
  CHECK_THROWS_AS(r.get_int("epoch"), FormatError);
  CHECK_THROWS_WITH(r.get_int("epoch"),
                    Contains(path) && Contains("'epoch'") && Contains("missing"));
  CHECK_THROWS_WITH(r.get_int("name"), Contains(path) && Contains("'name'") && Contains("str:run"));
  CHECK_THROWS_WITH(r.get_uint("step"), Contains("'step'") && Contains("int:-3"));
  CHECK_THROWS_WITH(r.get_int("lr"), Contains("'lr'") && Contains("float:0.5"));
  CHECK_THROWS_WITH(r.get_string("lr"), Contains("not a str"));
  CHECK_THROWS_WITH(r.get_float("name"), Contains("not a float"));
  CHECK_THROWS_WITH(r.section("optimizer"),
                    Contains(path) && Contains("'optimizer'") && Contains("model"));
  CHECK_THROWS_WITH(io::Checkpoint().get_int("x"), Contains("in-memory"));
  std::filesystem::remove(path);
  CHECK_THROWS_AS(io::Checkpoint::load(path), IOError);
}

TEST_CASE("Checkpoint: malformed files are rejected naming the problem", "[core][io]") {
  const io::Metadata ok = {{"nabla.format", "checkpoint/2"}, {"nabla.sections", "model"}};
  auto with = [&](const std::string& key, const std::string& value) {
    io::Metadata m = ok;
    m[key] = value;
    return m;
  };
  auto parse = [](const std::string& bytes) { return io::Checkpoint::parse(bytes, "ck.st"); };
  // Files are sealed with a valid checksum: what is tested is the rule, not the checksum.
  CHECK_NOTHROW(parse(sealed_file(ok, {{"model.w", ones({2})}})));

  // Not a checkpoint at all, or another version.
  CHECK_THROWS_WITH(parse(sealed_file({}, {{"w", ones({2})}})),
                    Contains("ck.st") && Contains("not a nabla checkpoint"));
  CHECK_THROWS_WITH(parse(sealed_file(with("nabla.format", "checkpoint/3"))),
                    Contains("checkpoint/3") && Contains("unsupported"));
  CHECK_THROWS_WITH(parse(sealed_file({{"nabla.format", "checkpoint/2"}})),
                    Contains("nabla.sections"));
  CHECK_THROWS_WITH(parse(sealed_file(with("nabla.sections", "model,,opt"))),
                    Contains("invalid section name ''"));
  CHECK_THROWS_WITH(parse(sealed_file(with("nabla.sections", "model,model"))),
                    Contains("'model' twice"));
  CHECK_THROWS_WITH(parse(sealed_file(with("nabla.extra", "1"))),
                    Contains("unknown reserved metadata key 'nabla.extra'"));

  // Tensors outside every section.
  CHECK_THROWS_WITH(parse(sealed_file(ok, {{"optimizer.x", ones({1})}})),
                    Contains("ck.st") && Contains("'optimizer.x'") && Contains("no section"));
  CHECK_THROWS_WITH(parse(sealed_file(ok, {{"model", ones({1})}})), Contains("'model'"));
  CHECK_THROWS_WITH(parse(sealed_file(ok, {{"model.", ones({1})}})), Contains("'model.'"));

  // Scalars with a bad type tag or text.
  CHECK_THROWS_WITH(parse(sealed_file(with("step", "20"))),
                    Contains("ck.st") && Contains("'step'") && Contains("no '<type>:' prefix"));
  CHECK_THROWS_WITH(parse(sealed_file(with("step", "i64:20"))), Contains("unknown type 'i64'"));
  CHECK_THROWS_WITH(parse(sealed_file(with("step", "int:20x"))),
                    Contains("'20x' is not a valid int"));
  CHECK_THROWS_WITH(parse(sealed_file(with("step", "int:99999999999999999999"))),
                    Contains("not a valid int"));
  CHECK_THROWS_WITH(parse(sealed_file(with("step", "int:+3"))), Contains("not a valid int"));
  CHECK_THROWS_WITH(parse(sealed_file(with("step", "int:"))), Contains("not a valid int"));
  CHECK_THROWS_WITH(parse(sealed_file(with("seed", "uint:-1"))), Contains("not a valid uint"));
  CHECK_THROWS_WITH(parse(sealed_file(with("seed", "uint:"))), Contains("not a valid uint"));
  CHECK_THROWS_WITH(parse(sealed_file(with("lr", "float:0.1.2"))), Contains("not a valid float"));
  CHECK_THROWS_WITH(parse(sealed_file(with("lr", "float: 1"))), Contains("not a valid float"));
  CHECK(parse(sealed_file(with("lr", "float:1e-3"))).get_float("lr") == 1e-3);
  CHECK(parse(sealed_file(with("s", "str:"))).get_string("s").empty());

  // Corruption below the checkpoint layer is still reported by the safetensors reader.
  std::string bytes = sealed_file(ok, {{"model.w", ones({2})}});
  bytes.resize(bytes.size() - 1);
  CHECK_THROWS_AS(parse(bytes), FormatError);
}

TEST_CASE("Checkpoint: generators resume their exact stream", "[core][io]") {
  Generator gen(1234);
  Tensor before = randn({5}, gen);  // advance the offset
  io::Checkpoint ck;
  io::save_generator(ck, "dropout", gen);
  const uint64_t saved_offset = gen.offset();
  CHECK(saved_offset > 0);
  Tensor expected = randn({7}, gen);

  io::Checkpoint r = io::Checkpoint::parse(ck.serialize(), "mem");
  Generator fresh(0);
  io::load_generator(r, "dropout", fresh);
  CHECK(fresh.seed() == 1234);
  CHECK(fresh.offset() == saved_offset);
  CHECK(bit_equal(randn({7}, fresh), expected));
  CHECK(fresh.offset() == gen.offset());
  CHECK_THROWS_WITH(io::load_generator(r, "other", fresh),
                    Contains("'generator.other.seed'") && Contains("missing"));

  // Seeds above INT64_MAX survive.
  io::Checkpoint big;
  io::save_generator(big, "g", Generator(~uint64_t{0}));
  Generator g2;
  io::load_generator(io::Checkpoint::parse(big.serialize(), "mem"), "g", g2);
  CHECK(g2.seed() == ~uint64_t{0});
}

TEST_CASE("Checkpoint: loader positions", "[core][io]") {
  io::Checkpoint ck;
  io::save_loader_position(ck, "train", {3, 17});
  io::LoaderPosition p =
      io::load_loader_position(io::Checkpoint::parse(ck.serialize(), "mem"), "train");
  CHECK(p.epoch == 3);
  CHECK(p.batch == 17);
  CHECK_THROWS_WITH(io::save_loader_position(ck, "train", {-1, 0}), Contains("epoch -1"));
  ck.set("loader.bad.epoch", 1);
  ck.set("loader.bad.batch", -2);
  CHECK_THROWS_WITH(io::load_loader_position(ck, "bad"), Contains("'bad'") && Contains("batch -2"));
  CHECK_THROWS_WITH(io::load_loader_position(ck, "val"), Contains("'loader.val.epoch'"));
}

}  // namespace NABLA_UNITY_ID
}  // namespace
