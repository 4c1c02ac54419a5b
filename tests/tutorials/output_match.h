// How a tutorial's shown output is compared with what its program prints (check_tutorial.cpp):
// exact line by line, except
//   - trailing spaces and trailing empty lines are ignored;
//   - `...` inside an expected line matches any text within that line (a timing, an address);
//   - an expected line that is only `...` matches any number of lines, none included (a table
//     whose rows come in the order of their timings).
#pragma once
#include <sstream>
#include <string>
#include <vector>

namespace tutorials {

// The text's lines without trailing spaces and without trailing empty lines.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    lines.push_back(line);
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

// `pattern` with every "..." matching any run of characters, against the whole of `line`.
inline bool line_matches(const std::string& pattern, const std::string& line) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t dots = pattern.find("...", start);
    parts.push_back(pattern.substr(start, dots - start));
    if (dots == std::string::npos) break;
    start = dots + 3;
  }
  if (parts.size() == 1) return pattern == line;
  // The first part is a prefix, the last a suffix, the middle ones appear in order between.
  const std::string &first = parts.front(), &last = parts.back();
  if (line.size() < first.size() + last.size() || line.compare(0, first.size(), first) != 0 ||
      line.compare(line.size() - last.size(), last.size(), last) != 0)
    return false;
  size_t at = first.size();
  const size_t end = line.size() - last.size();
  for (size_t i = 1; i + 1 < parts.size(); ++i) {
    const size_t found = line.find(parts[i], at);
    if (found == std::string::npos || found + parts[i].size() > end) return false;
    at = found + parts[i].size();
  }
  return true;
}

// Whether the expected lines match the actual ones, a lone "..." line taking any number of
// lines: dynamic programming over (expected prefix, actual prefix).
inline bool output_matches(const std::vector<std::string>& expected,
                           const std::vector<std::string>& actual) {
  const size_t e = expected.size(), a = actual.size();
  std::vector<std::vector<char>> ok(e + 1, std::vector<char>(a + 1, 0));
  ok[0][0] = 1;
  for (size_t i = 1; i <= e; ++i) {
    const bool any_lines = expected[i - 1] == "...";
    for (size_t j = 0; j <= a; ++j) {
      if (any_lines)
        ok[i][j] = ok[i - 1][j] || (j > 0 && ok[i][j - 1]);
      else
        ok[i][j] = j > 0 && ok[i - 1][j - 1] && line_matches(expected[i - 1], actual[j - 1]);
    }
  }
  return ok[e][a] != 0;
}

}  // namespace tutorials
