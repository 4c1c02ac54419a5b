#include "doc_claims.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

namespace doc_claims {
namespace {

namespace fs = std::filesystem;

// ----------------------------------------------------------------------------
// The tree: every file and directory below root, as relative paths with '/', without .git,
// hidden directories (but .ci) and the top-level directories of generated files: build* and
// runs/ (the examples' outputs, git-ignored). With runs/ in the tree, `runs/...` in the docs
// would be checked against whichever examples this clone happened to run.

struct Tree {
  fs::path root;
  std::vector<std::string> files, dirs;
  std::set<std::string> top;  // top-level entries
  std::map<std::string, std::vector<std::string>> lines;

  const std::vector<std::string>& lines_of(const std::string& file) {
    auto it = lines.find(file);
    if (it != lines.end()) return it->second;
    std::vector<std::string>& out = lines[file];
    std::ifstream in(root / file);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
};

Tree scan(const fs::path& root) {
  Tree t;
  t.root = root;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    const std::string name = it->path().filename().string();
    const std::string rel = it->path().lexically_relative(root).generic_string();
    if (it->is_directory()) {
      const bool hidden = name[0] == '.' && name != ".ci";
      const bool generated = name.rfind("build", 0) == 0 || name == "runs";
      if (hidden || (it.depth() == 0 && generated)) {
        it.disable_recursion_pending();
        continue;
      }
      t.dirs.push_back(rel);
    } else if (it->is_regular_file()) {
      t.files.push_back(rel);
    }
    if (it.depth() == 0) t.top.insert(name);
  }
  return t;
}

// A path pattern ('*' within one component) as a regex; `anywhere`: it may follow any directory.
std::regex pattern_regex(const std::string& pattern, bool anywhere) {
  std::string re = anywhere ? "(.*/)?" : "";
  for (char c : pattern) {
    if (c == '*') {
      re += "[^/]*";
    } else if (std::string(".^$|()[]{}+?\\").find(c) != std::string::npos) {
      re += '\\';
      re += c;
    } else {
      re += c;
    }
  }
  return std::regex(re);
}

std::vector<std::string> matches(const std::vector<std::string>& paths, const std::regex& re) {
  std::vector<std::string> out;
  for (const std::string& p : paths)
    if (std::regex_match(p, re)) out.push_back(p);
  return out;
}

// ----------------------------------------------------------------------------
// Which words in backticks are paths.

struct PathWord {
  std::vector<std::string> patterns;  // `tensor.h/.cpp` is two
  bool anywhere = false;              // a bare name, found below any directory
  bool dir_ok = false;                // may name a directory
};

const std::set<std::string> kFileExtensions = {"cpp", "h",     "hpp", "md", "sh",
                                               "py",  "cmake", "txt", "in", "json"};

std::optional<PathWord> as_path(std::string w, const Tree& t) {
  static const std::regex allowed("[A-Za-z0-9_.*/|+-]+");
  if (w.empty() || w[0] == '/' || !std::regex_match(w, allowed)) return std::nullopt;
  PathWord p;
  const bool trailing_slash = w.back() == '/';
  if (trailing_slash) w.pop_back();
  const auto slash = w.find('/');
  const bool anchored =
      (slash != std::string::npos || trailing_slash) && t.top.count(w.substr(0, slash));
  std::vector<std::string> names = {w};
  static const std::regex two_files(R"((.*)\.(\w+)/\.(\w+))");  // tensor.h/.cpp
  std::smatch m;
  if (std::regex_match(w, m, two_files))
    names = {m[1].str() + "." + m[2].str(), m[1].str() + "." + m[3].str()};
  static const std::regex file_name(R"((?:.*/)?[\w+-]+\.([\w|]+|\*))");
  bool file_like = !trailing_slash;
  std::vector<std::string> expanded;
  for (const std::string& name : names) {
    if (!std::regex_match(name, m, file_name)) {
      file_like = false;
      expanded.push_back(name);
      continue;
    }
    const std::string ext = m[1].str();
    const std::string stem = name.substr(0, name.size() - ext.size());
    if (ext == "*") {
      expanded.push_back(name);
      continue;
    }
    std::stringstream alternatives(ext);  // x.h|cpp
    for (std::string e; std::getline(alternatives, e, '|');) {
      if (!kFileExtensions.count(e)) file_like = false;
      expanded.push_back(stem + e);
    }
  }
  if (!anchored && !file_like) return std::nullopt;
  p.patterns = expanded;
  p.anywhere = !anchored;
  p.dir_ok = anchored && !file_like;
  return p;
}

// ----------------------------------------------------------------------------
// Brace blocks in C++ source.

// The line without comments, string and character literals, which may hold braces.
std::string code_only(const std::string& line) {
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '/' && i + 1 < line.size() && line[i + 1] == '/') break;
    if (c == '"' || c == '\'') {
      for (++i; i < line.size() && line[i] != c; ++i)
        if (line[i] == '\\') ++i;
      continue;
    }
    out += c;
  }
  return out;
}

// Whether lines [a, b] (1-based) are one whole block: the first brace opens it and its match
// closes it on line b.
bool whole_block(const std::vector<std::string>& lines, int a, int b) {
  int depth = 0;
  for (int i = a; i <= b; ++i) {
    for (char c : code_only(lines[static_cast<size_t>(i - 1)])) {
      if (c == '{') {
        ++depth;
      } else if (c == '}') {
        if (--depth < 0) return false;
        if (depth == 0) return i == b;
      }
    }
  }
  return false;
}

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether line holds name as a whole word.
bool names(const std::string& line, const std::string& name) {
  for (size_t at = line.find(name); at != std::string::npos; at = line.find(name, at + 1)) {
    const size_t after = at + name.size();
    if ((at == 0 || !word_char(line[at - 1])) && (after == line.size() || !word_char(line[after])))
      return true;
  }
  return false;
}

// The lines [first, last] (1-based) of name's definition: the first line that starts in column 0
// and names `name(`, with '{' before any ';', to the matching '}'.
std::optional<std::pair<int, int>> find_definition(const std::vector<std::string>& lines,
                                                   const std::string& name) {
  const std::regex call("(^|[^A-Za-z0-9_])" +
                        std::regex_replace(name, std::regex(R"(\W)"), R"(\$&)") + R"(\s*\()");
  const int n = static_cast<int>(lines.size());
  for (int i = 1; i <= n; ++i) {
    const std::string& line = lines[static_cast<size_t>(i - 1)];
    if (line.empty() || std::isspace(static_cast<unsigned char>(line[0])) || line[0] == '/' ||
        line[0] == '#' || !std::regex_search(code_only(line), call))
      continue;
    for (int j = i; j <= n; ++j) {
      const std::string code = code_only(lines[static_cast<size_t>(j - 1)]);
      const auto brace = code.find('{'), semicolon = code.find(';');
      if (semicolon != std::string::npos && semicolon < brace) break;  // a declaration
      if (brace == std::string::npos) continue;
      for (int k = j; k <= n; ++k)
        if (whole_block(lines, j, k)) return std::make_pair(i, k);
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// ----------------------------------------------------------------------------
// The docs, paragraph by paragraph (fenced code blocks skipped).

struct Paragraph {
  int first_line;
  std::string text;  // its lines joined by '\n'
};

std::vector<Paragraph> paragraphs(const fs::path& doc) {
  std::vector<Paragraph> out;
  std::ifstream in(doc);
  bool fenced = false, open = false;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.rfind("```", 0) == 0) {
      fenced = !fenced;
      open = false;
      continue;
    }
    const bool blank = line.find_first_not_of(" \t") == std::string::npos;
    if (fenced || blank) {
      open = false;
      continue;
    }
    if (!open) out.push_back({number, ""});
    if (open) out.back().text += '\n';
    out.back().text += line;
    open = true;
  }
  return out;
}

struct Checker {
  Tree tree;
  Report report;
  std::string doc;  // relative name of the doc being read
  const Paragraph* para = nullptr;

  void problem(size_t offset, const std::string& what) {
    const auto line = para->first_line + static_cast<int>(std::count(
                                             para->text.begin(),
                                             para->text.begin() + static_cast<long>(offset), '\n'));
    report.problems.push_back(doc + ":" + std::to_string(line) + ": " + what);
  }

  // The files (and, if allowed, directories) a path word stands for.
  std::vector<std::string> resolve(const PathWord& p, const std::string& pattern) {
    const std::regex re = pattern_regex(pattern, p.anywhere);
    std::vector<std::string> found = matches(tree.files, re);
    if (p.dir_ok) {
      std::vector<std::string> dirs = matches(tree.dirs, re);
      found.insert(found.end(), dirs.begin(), dirs.end());
    }
    return found;
  }

  // The one file a counted path names, or a problem.
  std::optional<std::string> one_file(size_t at, const std::string& word) {
    std::optional<PathWord> p = as_path(word, tree);
    if (!p || p->patterns.size() != 1) {
      problem(at, "`" + word + "` is not a file path the checker can count");
      return std::nullopt;
    }
    std::vector<std::string> found =
        matches(tree.files, pattern_regex(p->patterns[0], p->anywhere));
    if (found.size() != 1) {
      problem(at, "`" + word + "` names " + std::to_string(found.size()) + " files, not one");
      return std::nullopt;
    }
    return found[0];
  }

  void check_paths(const std::string& text) {
    static const std::regex span("`([^`]+)`"), range(R"(([^\s:]+):\d+(-\d+)?)");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), span);
         it != std::sregex_iterator(); ++it) {
      std::istringstream words((*it)[1].str());
      for (std::string w; words >> w;) {
        std::smatch m;
        if (std::regex_match(w, m, range)) w = m[1].str();
        std::optional<PathWord> p = as_path(w, tree);
        if (!p) continue;
        ++report.paths;
        for (const std::string& pattern : p->patterns)
          if (resolve(*p, pattern).empty())
            problem(static_cast<size_t>(it->position()), "`" + pattern + "` does not exist");
      }
    }
    static const std::regex link(R"(\]\(([^)\s#]+)(#[^)]*)?\))");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), link);
         it != std::sregex_iterator(); ++it) {
      const std::string target = (*it)[1].str();
      if (target.find(':') != std::string::npos) continue;  // a URL
      ++report.paths;
      const fs::path p = (tree.root / fs::path(doc).parent_path() / target).lexically_normal();
      if (!fs::exists(p))
        problem(static_cast<size_t>(it->position()), "link target " + target + " does not exist");
    }
  }

  // "~N": within 10%; "under N": fewer; else exactly N.
  void compare(size_t at, const std::string& what, int actual, const std::string& qualifier,
               int stated) {
    ++report.counts;
    const bool about = qualifier == "~", under = qualifier.rfind("under", 0) == 0;
    const bool ok = about   ? std::abs(actual - stated) <= std::max(stated / 10, 1)
                    : under ? actual < stated
                            : actual == stated;
    if (!ok)
      problem(at, what + " is " + std::to_string(actual) + " lines; the docs say " +
                      (about   ? "~"
                       : under ? "under "
                               : "") +
                      std::to_string(stated));
  }

  // Runs `re` over `rest`, hands each match to `claim` and blanks it out.
  template <class Claim>
  void each(std::string& rest, const std::regex& re, Claim claim) {
    std::smatch m;
    std::string::const_iterator from = rest.cbegin();
    std::vector<std::pair<size_t, size_t>> done;
    while (std::regex_search(from, rest.cend(), m, re)) {
      const auto at = static_cast<size_t>(m[0].first - rest.cbegin());
      claim(at, m);
      done.emplace_back(at, static_cast<size_t>(m.length(0)));
      from = m[0].second;
    }
    for (auto [at, n] : done)
      for (size_t i = at; i < at + n; ++i)
        if (rest[i] != '\n') rest[i] = ' ';
  }

  void check_counts(std::string rest) {
    static const std::regex named_range(
        R"(`([^`]+)`\s+\(`([^`:\s]+):(\d+)-(\d+)`(?:,\s+(\d+)\s+lines)?\))");
    each(rest, named_range, [&](size_t at, const std::smatch& m) {
      std::string name = m[1].str();
      if (name.size() > 2 && name.substr(name.size() - 2) == "()") name.resize(name.size() - 2);
      const auto file = one_file(at, m[2].str());
      if (!file) return;
      const std::vector<std::string>& lines = tree.lines_of(*file);
      const int a = std::stoi(m[3].str()), b = std::stoi(m[4].str());
      ++report.counts;
      if (a < 1 || b < a || b > static_cast<int>(lines.size())) {
        problem(at, m[2].str() + ":" + m[3].str() + "-" + m[4].str() + " is outside the file's " +
                        std::to_string(lines.size()) + " lines");
        return;
      }
      if (!names(lines[static_cast<size_t>(a - 1)], name) || !whole_block(lines, a, b)) {
        std::string where;
        if (auto def = find_definition(lines, name))
          where = " (`" + name + "` is now lines " + std::to_string(def->first) + "-" +
                  std::to_string(def->second) + ")";
        problem(at, *file + " lines " + std::to_string(a) + "-" + std::to_string(b) +
                        " are not one whole block that starts by naming `" + name + "`" + where);
      }
      if (m[5].matched) compare(at, "that range", b - a + 1, "", std::stoi(m[5].str()));
    });
    static const std::regex bare_range(R"(`[^`\s]+:\d+(-\d+)?`)");
    each(rest, bare_range, [&](size_t at, const std::smatch& m) {
      problem(at, m[0].str() +
                      ": a line range must follow the name of what it spans, as "
                      "`name` (`file:A-B`)");
    });
    static const std::regex named_count(
        R"(`([^`]+)`\s+in\s+`([^`]+)`\s+(?:is|are)\s+(~|under\s+)?(\d+)\s+lines)");
    each(rest, named_count, [&](size_t at, const std::smatch& m) {
      std::string name = m[1].str();
      if (name.size() > 2 && name.substr(name.size() - 2) == "()") name.resize(name.size() - 2);
      std::optional<PathWord> p = as_path(m[2].str(), tree);
      std::vector<std::string> files;
      if (p && p->patterns.size() == 1)
        files = matches(tree.files, pattern_regex(p->patterns[0], p->anywhere));
      if (files.empty()) problem(at, "`" + m[2].str() + "` names no file");
      // A pattern (examples/*/main.cpp) speaks of the files that define name; one of them must.
      const bool pattern = m[2].str().find('*') != std::string::npos;
      int defined = 0;
      for (const std::string& f : files) {
        auto def = find_definition(tree.lines_of(f), name);
        if (!def) {
          if (!pattern) problem(at, "no definition of `" + name + "` in " + f);
          continue;
        }
        ++defined;
        compare(at, "`" + name + "` in " + f, def->second - def->first + 1, m[3].str(),
                std::stoi(m[4].str()));
      }
      if (pattern && !files.empty() && defined == 0)
        problem(at, "no file `" + m[2].str() + "` names defines `" + name + "`");
    });
    // `path` (N lines) or (`path`, N lines)
    static const std::regex file_count(
        R"(`([^`]+)`\s+\((~|under\s+)?(\d+)\s+lines\)|\(`([^`]+)`,\s+(~|under\s+)?(\d+)\s+lines\))");
    each(rest, file_count, [&](size_t at, const std::smatch& m) {
      const int k = m[1].matched ? 1 : 4;
      if (auto file = one_file(at, m[k].str()))
        compare(at, *file, static_cast<int>(tree.lines_of(*file).size()), m[k + 1].str(),
                std::stoi(m[k + 2].str()));
    });
    static const std::regex every_file(
        R"([Ee]very\s+source\s+file\s+in\s+((?:`[^`]+`[\s,]*(?:and\s+)?)+)(?:is|are|stays?)\s+under\s+(\d+)\s+lines)");
    each(rest, every_file, [&](size_t at, const std::smatch& m) {
      const int limit = std::stoi(m[2].str());
      static const std::regex span("`([^`]+)`");
      const std::string dirs = m[1].str();
      for (auto it = std::sregex_iterator(dirs.begin(), dirs.end(), span);
           it != std::sregex_iterator(); ++it) {
        std::string dir = (*it)[1].str();
        if (!dir.empty() && dir.back() == '/') dir.pop_back();
        for (const std::string& f : tree.files) {
          const bool source = f.size() > 2 && (f.substr(f.size() - 2) == ".h" ||
                                               (f.size() > 4 && f.substr(f.size() - 4) == ".cpp"));
          if (source && f.rfind(dir + "/", 0) == 0)
            compare(at, f, static_cast<int>(tree.lines_of(f).size()), "under", limit);
        }
      }
    });
    static const std::regex loose_count(R"((~?\d+)[- ]lines?\b|\blines?\s+~?\d+)");
    each(rest, loose_count, [&](size_t at, const std::smatch& m) {
      problem(at, "\"" + m[0].str() +
                      "\" is a count the checker cannot tie to a file; write it "
                      "as one of the forms in tests/docs/doc_claims.h");
    });
  }

  void read(const std::string& name) {
    doc = name;
    for (const Paragraph& p : paragraphs(tree.root / name)) {
      para = &p;
      check_paths(p.text);
      check_counts(p.text);
    }
  }
};

}  // namespace

Report check(const fs::path& root) {
  Checker c{scan(root), {}, "", nullptr};
  std::vector<std::string> docs;
  if (fs::exists(root / "README.md")) docs.push_back("README.md");
  std::vector<std::string> in_docs;  // docs/*.md and below (docs/tutorials/)
  if (fs::is_directory(root / "docs"))
    for (const auto& e : fs::recursive_directory_iterator(root / "docs"))
      if (e.is_regular_file() && e.path().extension() == ".md")
        in_docs.push_back(e.path().lexically_relative(root).generic_string());
  std::sort(in_docs.begin(), in_docs.end());
  docs.insert(docs.end(), in_docs.begin(), in_docs.end());
  for (const std::string& d : docs) c.read(d);
  return c.report;
}

}  // namespace doc_claims
