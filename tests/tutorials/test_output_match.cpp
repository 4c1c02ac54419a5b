// The rules by which a tutorial's shown output is compared with its program's (output_match.h).
#include <catch2/catch.hpp>

#include "output_match.h"

using tutorials::line_matches;
using tutorials::lines_of;
using tutorials::output_matches;

TEST_CASE("tutorial output: lines compare exactly, trailing spaces and blank lines aside",
          "[tutorials]") {
  CHECK(lines_of("a  \nb\r\n\n\n") == std::vector<std::string>{"a", "b"});
  CHECK(output_matches(lines_of("x = 1\ny = 2\n"), lines_of("x = 1  \ny = 2\n\n")));
  CHECK_FALSE(output_matches(lines_of("x = 1\ny = 2"), lines_of("x = 1\ny = 3")));
  CHECK_FALSE(output_matches(lines_of("x = 1\ny = 2"), lines_of("x = 1")));
  CHECK_FALSE(output_matches(lines_of("x = 1"), lines_of("x = 1\ny = 2")));
  CHECK_FALSE(output_matches(lines_of(" x"), lines_of("x")));  // leading spaces count
}

TEST_CASE("tutorial output: ... inside a line matches any text in that line", "[tutorials]") {
  CHECK(line_matches("time ... us", "time 12.5 us"));
  CHECK(line_matches("time ... us", "time  us"));
  CHECK(line_matches("...", "anything"));
  CHECK(line_matches("a ... b ... c", "a 1 b 2 c"));
  CHECK(line_matches("ab...ba", "aba") == false);  // prefix and suffix may not overlap
  CHECK_FALSE(line_matches("time ... us", "time 12.5 ms"));
  CHECK_FALSE(line_matches("a ... b ... c", "a 1 c 2 b"));
  CHECK_FALSE(line_matches("x...", "y"));
}

TEST_CASE("tutorial output: a line of only ... matches any number of lines", "[tutorials]") {
  const auto expected = lines_of("header\n...\nfooter ...");
  CHECK(output_matches(expected, lines_of("header\nfooter 1")));
  CHECK(output_matches(expected, lines_of("header\nrow 1\nrow 2\nfooter 2")));
  CHECK_FALSE(output_matches(expected, lines_of("row 1\nheader\nfooter 1")));
  CHECK_FALSE(output_matches(expected, lines_of("header\nrow 1")));
  CHECK(output_matches(lines_of("...\nlast"), lines_of("a\nlast\nb\nlast")));
  CHECK_FALSE(output_matches(lines_of("...\nlast"), lines_of("a\nlast\nb")));
}
