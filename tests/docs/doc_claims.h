// Checks that what the docs (README.md, docs/**/*.md) quote about the source is true, so they
// cannot drift from the code unnoticed. Outside fenced code blocks it reads:
//   - every path in backticks (`ops/softmax.cpp`, `kernels/softmax.*`, `tensor.h/.cpp`, a
//     directory `optim/`) and every relative link target: it must exist. A path whose first part
//     is a top-level directory is taken from the root; a bare file name (`row_layout.h`) may
//     stand anywhere in the tree. Words with a `<placeholder>` are patterns, not paths.
//   - `path` (N lines), (~N lines: within 10%) or (under N lines), also as (`path`, N lines):
//     the file's line count.
//   - `name` in `path` is [~|under ]N lines: the definition of name (a function starting in
//     column 0, to its closing brace) in every file the path matches.
//   - `name` (`path:A-B`[, N lines]): lines A..B of path are one whole brace block whose first
//     line names `name`; N, if given, is B - A + 1. A range needs the name of what it spans.
//   - every source file in `dir/`, `dir/` ... is under N lines.
// Any other "N lines" in the text is an error too: a count must be in one of these forms.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace doc_claims {

struct Report {
  std::vector<std::string> problems;  // one line each: "docs/autograd.md:63: ..."
  int paths = 0, counts = 0;          // how many paths and counts were checked
};

// Reads root/README.md and every .md below root/docs against the files under root.
Report check(const std::filesystem::path& root);

}  // namespace doc_claims
