// Text sources: fortune-mod cookie files from Debian's fortunes packages.
#pragma once
#include <string>
#include <vector>

namespace nabla::data {

// Entries of one fortune file: split on lines holding only "%", attribution lines ("-- Name",
// "— Name") dropped, ANSI escape sequences stripped, whitespace collapsed to single spaces.
// Empty entries are skipped. A missing file or a directory is an IOError naming it.
std::vector<std::string> read_fortune_file(const std::string& path);
// Parses fortune text already in memory (source names it in errors).
std::vector<std::string> parse_fortunes(const std::string& text);

// The regular cookie files a Debian package installed (from /var/lib/dpkg/info/<pkg>.list):
// skips directories, symlinks and .dat index files. Throws naming the package to install.
std::vector<std::string> package_fortune_files(
    const std::string& package, const std::string& dpkg_info_dir = "/var/lib/dpkg/info");

// Number of UTF-8 code points in s (invalid bytes count as one each).
size_t utf8_length(const std::string& s);

}  // namespace nabla::data
