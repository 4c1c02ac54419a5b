// Shared by the libFuzzer targets (tests/fuzz): the rule every parser must keep — bad bytes are a
// nabla::Error, anything else is a crash — and an in-memory file for readers that take a path.
#pragma once
#include <sanitizer/common_interface_defs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>

#include "nabla/core/error.h"

namespace nabla::fuzz {

// Reports a broken invariant through the sanitizer's report stream (it stays open when
// -close_fd_mask silences the target's own stderr) and aborts, which libFuzzer records as a
// crash with its input.
[[noreturn]] inline void fail(const std::string& what) {
  __sanitizer_report_error_summary(("nabla fuzz: " + what).c_str());
  std::abort();
}

#define NABLA_FUZZ_CHECK(cond, what)                                    \
  do {                                                                  \
    if (!(cond)) ::nabla::fuzz::fail(std::string(#cond ": ") + (what)); \
  } while (0)

// Runs one input through `body`: a nabla::Error is the expected answer to bad bytes; any other
// exception (nlohmann, std::bad_alloc, std::length_error...) is a finding.
template <class F>
int guarded(F&& body) {
  try {
    body();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    fail(std::string("escaped as ") + typeid(e).name() + ": " + e.what());
  }
  return 0;
}

// An anonymous in-memory file (memfd) reachable through a path, for readers that open a path:
// no disk traffic per input, and fstat reports a regular file of exactly the input's size.
class MemFile {
 public:
  MemFile() : fd_(::memfd_create("nabla-fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) fail("memfd_create failed");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  const std::string& write(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) fail("ftruncate failed");
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) fail("pwrite failed");
      done += static_cast<size_t>(n);
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace nabla::fuzz
