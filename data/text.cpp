#include "nabla/data/text.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "nabla/core/error.h"
#include "nabla/core/io/safetensors.h"

namespace nabla::data {
namespace {

std::string strip_ansi(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b') {
      // CSI: ESC [ params final-byte(@..~); other escapes: ESC + one char.
      if (i + 1 < s.size() && s[i + 1] == '[') {
        i += 2;
        while (i < s.size() && !(s[i] >= '@' && s[i] <= '~')) ++i;
      } else {
        ++i;
      }
      continue;
    }
    out += s[i];
  }
  return out;
}

bool is_attribution(const std::string& line) {
  size_t i = line.find_first_not_of(" \t");
  if (i == std::string::npos) return false;
  return line.compare(i, 2, "--") == 0 || line.compare(i, 3, "\xe2\x80\x94") == 0;  // "—"
}

std::string collapse_whitespace(const std::string& s) {
  std::string out;
  bool space = false;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      space = !out.empty();
    } else if (static_cast<unsigned char>(c) < 0x20 && c != '\x1b') {
      continue;  // other control characters (backspace overstrike etc.)
    } else {
      if (space) out += ' ';
      space = false;
      out += c;
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> parse_fortunes(const std::string& text) {
  std::vector<std::string> entries;
  std::string current;
  std::istringstream in(text);
  std::string line;
  auto flush = [&] {
    std::string e = collapse_whitespace(strip_ansi(current));
    if (!e.empty()) entries.push_back(std::move(e));
    current.clear();
  };
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "%") {
      flush();
      continue;
    }
    if (is_attribution(line)) continue;
    current += line;
    current += '\n';
  }
  flush();
  return entries;
}

std::vector<std::string> read_fortune_file(const std::string& path) {
  return parse_fortunes(io::read_file(path));  // IOError naming a missing file or a directory
}

std::vector<std::string> package_fortune_files(const std::string& package,
                                               const std::string& dpkg_info_dir) {
  const std::string list = dpkg_info_dir + "/" + package + ".list";
  std::ifstream in(list);
  if (!in)
    throw IOError(fmt::format(
        "Debian package '{}' is not installed ({} not found); run `apt-get install {}` or "
        "scripts/setup.sh",
        package, list, package));
  std::vector<std::string> files;
  std::string path;
  while (std::getline(in, path)) {
    if (path.find("/fortunes/") == std::string::npos) continue;
    if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".dat") == 0) continue;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // dirs, symlinks
    files.push_back(path);
  }
  if (files.empty())
    throw IOError(fmt::format("Debian package '{}' lists no fortune files in {}", package, list));
  return files;
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace nabla::data
