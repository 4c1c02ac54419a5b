// Storage: one 64-byte aligned buffer shared by a tensor and all its views, with the version
// counter that in-place ops bump and saved tensors check.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace nabla {

class Storage {
 public:
  // zero_fill=false leaves the bytes uninitialised, for outputs a kernel fully overwrites.
  explicit Storage(size_t nbytes, bool zero_fill = true);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  uint64_t version_ = 0;
};

}  // namespace nabla
