// check_tutorial --block <where> <expected file> <program> <block name> [--block ...]: runs each
// block of a tutorial (`program block`; tests/tutorials/CMakeLists.txt extracts them) in order and
// compares what it prints on stdout with the output the tutorial shows after it, by the rules of
// output_match.h. A block that exits non-zero fails. Exit code: 0 when every block matched.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "output_match.h"

namespace {

struct Run {
  std::string out;
  int status = -1;
};

Run run(const std::string& program, const std::string& block) {
  Run r;
  FILE* pipe = popen(("'" + program + "' '" + block + "'").c_str(), "r");
  if (!pipe) return r;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) r.out.append(buffer, n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void print_lines(const char* title, const std::vector<std::string>& lines) {
  std::cout << "---- " << title << " ----\n";
  for (const std::string& l : lines) std::cout << l << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6 || (argc - 1) % 5 != 0) {
    std::cerr << "usage: check_tutorial --block <where> <expected file> <program> <block> [...]\n";
    return 2;
  }
  int failed = 0, blocks = 0;
  for (int i = 1; i + 4 < argc; i += 5) {
    const std::string where = argv[i + 1], expected_path = argv[i + 2], program = argv[i + 3];
    ++blocks;
    const Run r = run(program, argv[i + 4]);
    const std::vector<std::string> expected = tutorials::lines_of(read_file(expected_path)),
                                   actual = tutorials::lines_of(r.out);
    if (r.status != 0) {
      std::cout << where << ": the program exited with status " << r.status << "\n";
      print_lines("what it printed", actual);
      ++failed;
    } else if (!tutorials::output_matches(expected, actual)) {
      std::cout << where << ": the output differs from the one the tutorial shows\n";
      print_lines("the tutorial shows", expected);
      print_lines("the program printed", actual);
      ++failed;
    } else {
      std::cout << where << ": ok\n";
    }
  }
  std::cout << blocks - failed << " of " << blocks << " blocks print what the tutorial shows\n";
  return failed == 0 ? 0 : 1;
}
