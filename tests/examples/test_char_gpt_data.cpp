// examples/char_gpt's data: the King James Bible split (issue 20's exact counts), the vocabulary
// and its errors, and the n-gram yardstick (issue 20's 1.070 / 1.163 nats/char).
#include <catch2/catch.hpp>
#include <cmath>

#include "examples/char_gpt/corpus.h"
#include "examples/char_gpt/ngram.h"
#include "nabla/core/error.h"

using namespace char_gpt;
using Catch::Matchers::Contains;

namespace {

const Corpus& kjv() {
  static const Corpus corpus = load_kjv();
  return corpus;
}

}  // namespace

TEST_CASE("char_gpt corpus: the King James Bible split has issue 20's counts", "[char_gpt]") {
  const Corpus& c = kjv();
  CHECK(c.chapters == 1189);
  CHECK(c.validation_chapters == 59);
  CHECK(c.train.size() == 3935815);
  CHECK(c.validation.size() == 202035);
  const Vocabulary vocab(c.train);
  CHECK(vocab.size() == 63);
  CHECK(vocab.chars().front() == '\n');
  CHECK(c.train.substr(0, 59) == "In the beginning God created the heaven and the earth.\nAnd ");
  // Chapter 20 (Genesis 20) opens the validation text.
  CHECK(c.validation.substr(0, 40) == "And Abraham journeyed from thence toward");
  CHECK_NOTHROW(vocab.encode(c.validation, "the validation text"));
}

TEST_CASE("char_gpt corpus: chapters counted across verses and books", "[char_gpt]") {
  std::string listing;
  for (int chapter = 1; chapter <= 25; ++chapter)
    listing += "Ge" + std::to_string(chapter) + ":1 a\nGe" + std::to_string(chapter) + ":2 b\n";
  listing += "1Jo1:1 c\n3Jo1:1 d";  // books starting with a digit; no final newline
  const Corpus c = split_bible_listing(listing);
  CHECK(c.chapters == 27);
  CHECK(c.validation_chapters == 1);
  CHECK(c.validation == "a\nb\n");
  CHECK(c.train.size() == 24 * 4 + 4);
  CHECK(c.train.substr(c.train.size() - 4) == "c\nd\n");
  CHECK_THROWS_WITH(split_bible_listing("Ge1:1 a\nno reference here\n"),
                    Contains("line 2") && Contains("no reference"));
}

TEST_CASE("char_gpt corpus: a missing bible program names the package", "[char_gpt]") {
  CHECK_THROWS_WITH(load_kjv("/nonexistent/bible"),
                    Contains("bible-kjv") && Contains("scripts/setup.sh"));
}

TEST_CASE("char_gpt vocabulary: sorted ids, round trip, bytes outside it", "[char_gpt]") {
  const Vocabulary vocab("hello world\n");
  CHECK(vocab.chars() == "\n dehlorw");
  const std::vector<int64_t> ids = vocab.encode("hold", "x");
  CHECK(ids == std::vector<int64_t>{4, 6, 5, 2});
  CHECK(vocab.decode(ids) == "hold");
  CHECK(vocab.encode_tensor("od", "x").to_vector<int64_t>() == std::vector<int64_t>{6, 2});
  CHECK_THROWS_AS(vocab.encode("hellx", "--prompt"), nabla::ValueError);
  CHECK_THROWS_WITH(vocab.encode("hellx", "--prompt"),
                    Contains("--prompt") && Contains("0x78 ('x')") && Contains("offset 4"));
  CHECK_THROWS_WITH(vocab.encode("h\xe9", "--prompt"), Contains("0xe9") && Contains("offset 1"));
  CHECK_THROWS_AS(vocab.decode({9}), nabla::IndexError);
}

TEST_CASE("char_gpt validation windows: every character scored once, with context", "[char_gpt]") {
  for (const auto& [characters, context] : std::vector<std::pair<int64_t, int64_t>>{
           {10, 4}, {11, 4}, {100, 32}, {64, 64}, {7, 1}, {5, 3}, {202035, 128}}) {
    INFO("characters " << characters << ", context " << context);
    const std::vector<ScoredWindow> windows = scored_windows(characters, context);
    int64_t next_target = 1;  // targets are 1..characters in the '\n'-prefixed sequence
    for (size_t w = 0; w < windows.size(); ++w) {
      const ScoredWindow& win = windows[w];
      REQUIRE(win.start >= 0);
      REQUIRE(win.start + context <= characters);  // the window's targets exist
      // At least context - context / 2 tokens before every scored one, after the first window.
      if (w == 0) CHECK(win.first_score == 0);
      if (w > 0) CHECK(win.first_score >= context - std::max<int64_t>(1, context / 2));
      for (int64_t j = win.first_score; j < context; ++j)
        REQUIRE(win.start + j + 1 == next_target++);
    }
    CHECK(next_target == characters + 1);
  }
  CHECK(scored_windows(202035, 128).size() == 3156);
  CHECK_THROWS_WITH(scored_windows(3, 4), Contains("3 characters") && Contains("windows of 4"));
}

TEST_CASE("char_gpt n-gram: a hand-computed bigram and normalisation", "[char_gpt]") {
  // Text "abab" (a=0, b=1), vocab 3, order 2, D = 0.5.
  NgramModel m(2, 0.5, 3);
  m.train({0, 1, 0, 1});
  // Unigram: N = 4, T = 2, N(a) = N(b) = 2: p(a) = 1.5/4 + 0.5*2/4 * 1/3 = 0.375 + 1/12.
  const double pa = 1.5 / 4 + 0.25 / 3, pc = 0.25 / 3;
  CHECK(m.probability(nullptr, 0, 0) == Approx(pa));
  CHECK(m.probability(nullptr, 0, 2) == Approx(pc));
  // After a: N(a) = 2 (both followed by b), T = 1: p(b|a) = 1.5/2 + 0.5/2 * p(b).
  const int64_t a = 0;
  CHECK(m.probability(&a, 1, 1) == Approx(0.75 + 0.25 * pa));
  CHECK(m.probability(&a, 1, 0) == Approx(0.25 * pa));
  // After b: N(b) = 1 (the last b has no successor), T = 1.
  const int64_t b = 1;
  CHECK(m.probability(&b, 1, 0) == Approx(0.5 + 0.5 * pa));
  // An unseen context backs off to the unigram unchanged.
  const int64_t c = 2;
  CHECK(m.probability(&c, 1, 0) == Approx(pa));
  for (const int64_t* h : {&a, &b, &c}) {
    double total = 0;
    for (int64_t x = 0; x < 3; ++x) total += m.probability(h, 1, x);
    CHECK(total == Approx(1.0));
  }
  CHECK_THROWS_AS(NgramModel(0, 0.75, 3), nabla::ValueError);
  CHECK_THROWS_AS(NgramModel(3, 1.5, 3), nabla::ValueError);
  CHECK_THROWS_AS(m.train({0, 3}), nabla::IndexError);
}

TEST_CASE("char_gpt n-gram: issue 20's yardstick on the King James split", "[char_gpt]") {
  const Corpus& c = kjv();
  const Vocabulary vocab(c.train);
  const std::vector<int64_t> train = vocab.encode(c.train, "train");
  const std::vector<int64_t> valid = vocab.encode(c.validation, "validation");
  NgramModel seven(7, 0.75, vocab.size()), five(5, 0.75, vocab.size());
  seven.train(train);
  five.train(train);
  // Normalised over the vocabulary after a real context of the validation text.
  double total = 0;
  for (int64_t x = 0; x < vocab.size(); ++x) total += seven.probability(valid.data(), 500, x);
  CHECK(total == Approx(1.0).epsilon(1e-12));
  CHECK(seven.nats_per_char(valid) == Approx(1.070).margin(0.005));
  CHECK(five.nats_per_char(valid) == Approx(1.163).margin(0.005));
}
