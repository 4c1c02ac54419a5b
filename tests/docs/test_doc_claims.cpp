// The docs checker on small made-up trees: each true quote passes, each kind of rot is reported.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "doc_claims.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

// lib/engine.cpp: run is lines 3-8 (6 lines), its loop lines 5-7; the file has 9 lines.
constexpr const char* kSource =
    "// A small source file.\n"
    "#include <vector>\n"
    "int run(int n) {\n"
    "  int s = 0;\n"
    "  for (int i = 0; i < n; ++i) {\n"
    "    s += i;  // a } in a comment\n"
    "  }\n"
    "  return s; }\n"
    "int other();\n";

struct TempTree {
  fs::path root;
  TempTree() {
    static int made = 0;
    root = fs::temp_directory_path() /
           ("doc_claims_" + std::to_string(getpid()) + "_" + std::to_string(made++));
    fs::remove_all(root);
    fs::create_directories(root / "docs");
    fs::create_directories(root / "lib" / "sub");
    write("lib/engine.cpp", kSource);
    write("lib/sub/helper.h", "#pragma once\n");
  }
  ~TempTree() { fs::remove_all(root); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(root / name) << text;
  }
  // The problems the checker finds in a docs/page.md holding `text`.
  doc_claims::Report page(const std::string& text) const {
    write("docs/page.md", text);
    return doc_claims::check(root);
  }
};

std::string joined(const doc_claims::Report& r) {
  std::string out;
  for (const std::string& p : r.problems) out += p + "\n";
  return out;
}

}  // namespace

TEST_CASE("docs checker: true quotes pass", "[docs]") {
  TempTree t;
  const doc_claims::Report r = t.page(
      "Read `lib/engine.cpp` (9 lines), then `helper.h`, `engine.*`, `lib/sub/` and\n"
      "[the page](page.md). `run` (`lib/engine.cpp:3-8`, 6 lines) holds a loop\n"
      "(`for` (`lib/engine.cpp:5-7`)); `run()` in `lib/*.cpp` is 6 lines, `lib/engine.cpp`\n"
      "(~10 lines) (or (`engine.cpp`, under 10 lines)), and every\nsource file in `lib/` is under\n"
      "10 lines.\n"
      "\n"
      "```\n"
      "`gone.cpp` (3 lines) inside a code block is code, not a quote\n"
      "```\n"
      "Not paths: `metrics.csv`, `/proc/stat`, `ops/<family>.cpp`, `x.shape`, `mask/valid`.\n");
  INFO(joined(r));
  CHECK(r.problems.empty());
  CHECK(r.paths == 11);
  CHECK(r.counts == 9);  // 9, two ranges and one range's count, run(), ~10, under 10, 2 sources
}

TEST_CASE("docs checker: pages below docs/ are read, links relative to each page", "[docs]") {
  TempTree t;
  fs::create_directories(t.root / "docs" / "tutorials");
  t.write("docs/tutorials/one.md",
          "See [two](two.md), [the page](../page.md) and `lib/gone.cpp`.\n");
  t.write("docs/tutorials/two.md", "Back to [one](one.md).\n");
  const doc_claims::Report r = t.page("Read [the tutorials](tutorials/one.md).\n");
  INFO(joined(r));
  REQUIRE(r.problems.size() == 1);
  CHECK_THAT(r.problems[0], Contains("docs/tutorials/one.md:1: `lib/gone.cpp` does not exist"));
  CHECK(r.paths == 5);
}

TEST_CASE("docs checker: a quoted path that does not exist", "[docs]") {
  TempTree t;
  CHECK_THAT(joined(t.page("intro\n\nSee `lib/gone.cpp`.\n")),
             Contains("docs/page.md:3: `lib/gone.cpp` does not exist"));
  CHECK_THAT(joined(t.page("See `missing.h`.\n")), Contains("`missing.h` does not exist"));
  CHECK_THAT(joined(t.page("See `lib/nothing/`.\n")), Contains("`lib/nothing` does not exist"));
  CHECK_THAT(joined(t.page("See `engine.h/.cpp`.\n")), Contains("`engine.h` does not exist"));
  CHECK_THAT(joined(t.page("See [it](../lib/gone.md).\n")),
             Contains("link target ../lib/gone.md does not exist"));
}

TEST_CASE("docs checker: the examples' runs/ directory is not part of the tree", "[docs]") {
  // After the README's first command a clone has runs/transformer_langid/ and nothing else there;
  // the docs' `runs/...` words must not turn into claims about it.
  TempTree t;
  fs::create_directories(t.root / "runs" / "transformer_langid");
  t.write("runs/transformer_langid/metrics.csv", "step,loss\n");
  const doc_claims::Report r = t.page("The tour writes `runs/autograd_tour/graph.svg`.\n");
  INFO(joined(r));
  CHECK(r.problems.empty());
  fs::create_directories(t.root / "build" / "dev");  // build directories, the same
  CHECK(t.page("See `build/dev/tests/test_core`.\n").problems.empty());
}

TEST_CASE("docs checker: a line count that is off", "[docs]") {
  TempTree t;
  CHECK_THAT(joined(t.page("`lib/engine.cpp` (8 lines)\n")),
             Contains("lib/engine.cpp is 9 lines; the docs say 8"));
  CHECK_THAT(joined(t.page("`lib/engine.cpp` (~20 lines)\n")),
             Contains("lib/engine.cpp is 9 lines; the docs say ~20"));
  CHECK_THAT(joined(t.page("`lib/engine.cpp` (under 9 lines)\n")),
             Contains("the docs say under 9"));
  CHECK_THAT(joined(t.page("(`lib/engine.cpp`, 7 lines)\n")), Contains("the docs say 7"));
  CHECK_THAT(joined(t.page("`run` in `lib/engine.cpp` is 5 lines\n")),
             Contains("`run` in lib/engine.cpp is 6 lines; the docs say 5"));
  CHECK_THAT(joined(t.page("`other` in `lib/engine.cpp` is 1 lines\n")),
             Contains("no definition of `other` in lib/engine.cpp"));
  CHECK_THAT(joined(t.page("`other` in `lib/*.cpp` is 1 lines\n")),
             Contains("no file `lib/*.cpp` names defines `other`"));
  CHECK_THAT(joined(t.page("every source file in `lib/` is under 9 lines\n")),
             Contains("lib/engine.cpp is 9 lines; the docs say under 9"));
}

TEST_CASE("docs checker: a line range that no longer spans what it names", "[docs]") {
  TempTree t;
  CHECK_THAT(joined(t.page("`run` (`lib/engine.cpp:3-7`)\n")),
             Contains("lines 3-7 are not one whole block that starts by naming `run` (`run` is "
                      "now lines 3-8)"));
  CHECK_THAT(joined(t.page("`for` (`lib/engine.cpp:3-8`)\n")),
             Contains("not one whole block that starts by naming `for`"));
  CHECK_THAT(joined(t.page("`run` (`lib/engine.cpp:3-8`, 5 lines)\n")),
             Contains("that range is 6 lines; the docs say 5"));
  CHECK_THAT(joined(t.page("`run` (`lib/engine.cpp:3-80`)\n")),
             Contains("outside the file's 9 lines"));
  CHECK_THAT(joined(t.page("see `lib/engine.cpp:3-8`\n")),
             Contains("a line range must follow the name of what it spans"));
}

TEST_CASE("docs checker: a count in no form it can check is an error", "[docs]") {
  TempTree t;
  CHECK_THAT(joined(t.page("The loop is 21 lines long.\n")),
             Contains("\"21 lines\" is a count the checker cannot tie to a file"));
  CHECK_THAT(joined(t.page("Its node is at line ~405.\n")), Contains("\"line ~405\""));
  CHECK_THAT(joined(t.page("A 14-line backward.\n")), Contains("\"14-line\""));
}
