// check_docs <source dir>: lists what README.md and docs/*.md quote wrongly about the source
// (doc_claims.h has the forms it reads); exit code 1 if anything, or nothing was checked.
#include <iostream>

#include "doc_claims.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: check_docs <source dir>\n";
    return 2;
  }
  const doc_claims::Report r = doc_claims::check(argv[1]);
  for (const std::string& p : r.problems) std::cout << p << "\n";
  std::cout << "docs_check: " << r.paths << " paths and " << r.counts << " counts checked, "
            << r.problems.size() << " wrong\n";
  return r.problems.empty() && r.paths > 0 && r.counts > 0 ? 0 : 1;
}
