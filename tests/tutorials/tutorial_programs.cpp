// tutorial_programs <block>: runs one code block of docs/tutorials/ (tests/tutorials/CMakeLists.txt
// puts each block in namespace tutorial_<block>, its main renamed tutorial_main). One block per
// process, as a reader would run it: global state (seeds, thread counts, the allocator's cache)
// starts fresh for each. An exception that escapes a block is printed and exits with status 1.
#include <cstdio>
#include <cstring>
#include <exception>

#define TUTORIAL_BLOCK(name)  \
  namespace tutorial_##name { \
    void tutorial_main();     \
  }
#include "blocks.inc"
#undef TUTORIAL_BLOCK

namespace {

struct Block {
  const char* name;
  void (*run)();
};

#define TUTORIAL_BLOCK(name) {#name, &tutorial_##name::tutorial_main},
const Block kBlocks[] = {
#include "blocks.inc"
};
#undef TUTORIAL_BLOCK

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2) {
    for (const Block& b : kBlocks) {
      if (std::strcmp(argv[1], b.name) != 0) continue;
      try {
        b.run();
        return 0;
      } catch (const std::exception& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "%s: uncaught exception: %s\n", b.name, e.what());
        return 1;
      }
    }
  }
  std::fprintf(stderr, "usage: tutorial_programs <block>; the blocks are:\n");
  for (const Block& b : kBlocks) std::fprintf(stderr, "  %s\n", b.name);
  return 2;
}
