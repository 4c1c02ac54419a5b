#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "nabla/data/dataloader.h"
#include "nabla/data/idx.h"
#include "nabla/data/langid.h"
#include "nabla/data/text.h"
#include "nabla/data/tokenizer.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using namespace nabla::data;
using Catch::Matchers::Contains;

namespace {

std::string tmp(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("nabla_data_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f);
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

std::string idx_bytes(std::vector<uint32_t> dims, size_t payload) {
  std::string s = {0, 0, 8, static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int k = 3; k >= 0; --k) s += static_cast<char>((d >> (8 * k)) & 0xFF);
  for (size_t i = 0; i < payload; ++i) s += static_cast<char>(i % 251);
  return s;
}

}  // namespace

TEST_CASE("IDX reader reads gzip and validates magic, dims and size", "[data]") {
  const std::string good = tmp("good.gz");
  write_gz(good, idx_bytes({2, 3}, 6));
  Tensor t = read_idx(good);
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4, 5});

  const std::string trunc = tmp("trunc.gz");
  write_gz(trunc, idx_bytes({2, 3}, 5));
  CHECK_THROWS_AS(read_idx(trunc), FormatError);
  CHECK_THROWS_WITH(read_idx(trunc), Contains(trunc) && Contains("truncated"));

  std::string bad = idx_bytes({2}, 2);
  bad[2] = 0x0D;  // float type: not supported
  const std::string magic = tmp("magic.gz");
  write_gz(magic, bad);
  CHECK_THROWS_WITH(read_idx(magic), Contains("bad IDX magic") && Contains("offset 0"));

  const std::string header = tmp("header.gz");
  write_gz(header, idx_bytes({2, 3}, 0).substr(0, 9));
  CHECK_THROWS_WITH(read_idx(header), Contains("truncated IDX header"));

  const std::string corrupt = tmp("corrupt.gz");
  {
    write_gz(corrupt, idx_bytes({100}, 100));
    std::string bytes;
    {
      std::ifstream in(corrupt, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    std::ofstream out(corrupt, std::ios::binary | std::ios::trunc);
    out << bytes.substr(0, bytes.size() / 2);  // cut the gzip stream
  }
  CHECK_THROWS_AS(read_idx(corrupt), FormatError);

  CHECK_THROWS_WITH(read_mnist_style("/nonexistent/fashion", "train"),
                    Contains("/nonexistent/fashion") && Contains("dataset-fashion-mnist"));
  for (const auto& p : {good, trunc, magic, header, corrupt}) std::filesystem::remove(p);
}

TEST_CASE("Fashion-MNIST from Debian's package loads with the right counts", "[data]") {
  if (!std::filesystem::exists(kFashionMnistDir)) {
    WARN("dataset-fashion-mnist not installed; skipping");
    return;
  }
  ImageDataset test = read_mnist_style(kFashionMnistDir, "t10k");
  CHECK(test.images.shape() == Shape{10000, 28, 28});
  CHECK(test.labels.shape() == Shape{10000});
  auto labels = test.labels.to_vector<int64_t>();
  CHECK(*std::max_element(labels.begin(), labels.end()) == 9);
  CHECK(std::count(labels.begin(), labels.end(), 3) == 1000);
}

TEST_CASE("fortune parsing splits entries, drops attributions and ANSI escapes", "[data]") {
  auto e = parse_fortunes(
      "First  entry\nspans lines.\n\t\t-- Someone Famous\n%\n\x1b[1mBold\x1b[0m text\n%\n%\n"
      "Last one\n");
  REQUIRE(e.size() == 3);
  CHECK(e[0] == "First entry spans lines.");
  CHECK(e[1] == "Bold text");
  CHECK(e[2] == "Last one");
  const std::string empty_file = tmp("empty_fortune");
  { std::ofstream(empty_file) << ""; }
  CHECK(read_fortune_file(empty_file).empty());
  std::filesystem::remove(empty_file);
  CHECK_THROWS_WITH(read_fortune_file("/nonexistent/fortune"), Contains("/nonexistent/fortune"));
  CHECK_THROWS_WITH(package_fortune_files("fortunes-klingon"),
                    Contains("fortunes-klingon") && Contains("apt-get install"));
}

TEST_CASE("the langid corpus is deterministic and balanced", "[data]") {
  if (!std::filesystem::exists("/var/lib/dpkg/info/fortunes-ru.list")) {
    WARN("fortunes packages not installed; skipping");
    return;
  }
  LangIdCorpus c = load_fortune_langid();
  CHECK(c.languages.size() == 8);
  CHECK(c.train.size() > 12000);
  CHECK(c.test.size() > 1200);
  std::set<std::string> train_texts;
  for (const auto& ex : c.train) train_texts.insert(ex.text);
  for (const auto& ex : c.test) CHECK(train_texts.count(ex.text) == 0);
  LangIdCorpus again = load_fortune_langid();
  REQUIRE(again.train.size() == c.train.size());
  CHECK(again.train.front().text == c.train.front().text);
  CHECK(again.test.back().text == c.test.back().text);
}

TEST_CASE("tokenizers round-trip and place special tokens", "[data]") {
  ByteTokenizer bt;
  auto ids = bt.encode("héllo", 0, true);
  CHECK(ids.front() == SpecialTokens::kCls);
  CHECK(ids.size() == 7);  // CLS + 6 bytes (é is 2 bytes)
  CHECK(bt.decode(ids) == "héllo");
  CHECK(bt.encode("abcdef", 3).size() == 3);
  CharTokenizer ct = CharTokenizer::build({"abca", "été"});
  auto c = ct.encode("aé?", true, true);
  CHECK(c.front() == SpecialTokens::kBos);
  CHECK(c.back() == SpecialTokens::kEos);
  CHECK(c[3] == SpecialTokens::kUnk);
  CHECK(ct.decode(c) == "aé");
  CHECK(ct.chars().front() == "a");  // most frequent first
}

TEST_CASE("DataLoader shuffles reproducibly, drops the last batch, and resumes", "[data]") {
  using Loader = DataLoader<std::vector<int64_t>>;
  auto identity = [](const std::vector<int64_t>& idx) { return idx; };
  Loader::Options opts;
  opts.batch_size = 4;
  opts.seed = 9;
  Loader a(10, opts, identity), b(10, opts, identity);
  std::vector<int64_t> seen;
  while (auto batch = a.next()) seen.insert(seen.end(), batch->begin(), batch->end());
  CHECK(seen.size() == 10);
  CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == 10);
  CHECK(seen != std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(*b.next() == std::vector<int64_t>(seen.begin(), seen.begin() + 4));
  a.next_epoch();
  auto e1 = *a.next();
  CHECK(e1 != std::vector<int64_t>(seen.begin(), seen.begin() + 4));  // new order per epoch

  opts.drop_last = true;
  Loader d(10, opts, identity);
  CHECK(d.batches_per_epoch() == 2);

  // Resume: a loader restored to a cursor continues exactly like the original.
  Loader orig(10, opts, identity);
  orig.next_epoch();
  orig.next();
  LoaderCursor cur = orig.cursor();
  Loader resumed(10, opts, identity);
  resumed.restore(cur);
  CHECK(*resumed.next() == *orig.next());
  CHECK(!resumed.next().has_value());
}

TEST_CASE("pad_sequences builds tokens, valid_lens and the key padding mask", "[data]") {
  PaddedBatch b = pad_sequences({{7, 8, 9}, {5}}, 0);
  CHECK(b.tokens.shape() == Shape{2, 3});
  CHECK(b.tokens.to_vector<int64_t>() == std::vector<int64_t>{7, 8, 9, 5, 0, 0});
  CHECK(b.valid_lens.to_vector<int64_t>() == std::vector<int64_t>{3, 1});
  CHECK(b.key_padding_mask.to_vector<bool>() ==
        std::vector<bool>{false, false, false, false, true, true});
  CHECK(pad_sequences({{1, 2, 3, 4}}, 0, 2).tokens.shape() == Shape{1, 2});
}

}  // namespace NABLA_UNITY_ID
}  // namespace
