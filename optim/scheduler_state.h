// Internal to optim: reading and writing the scalar state of LR schedules as named tensors.
#pragma once
#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "nabla/core/error.h"
#include "nabla/optim/optimizer.h"

namespace nabla::optim::detail {

inline Tensor vector_tensor(const std::vector<double>& v) {
  return from_vector<double>(v, {static_cast<int64_t>(v.size())});
}

// Looks up the keys of a scheduler's state_dict, rejecting unknown or malformed entries.
class StateReader {
 public:
  StateReader(const std::string& owner, const NamedTensors& dict) : owner_(owner) {
    for (const auto& [key, t] : dict) entries_[key] = t;
  }
  int64_t int64(const std::string& key) {
    const Tensor& t = get(key);
    if (t.dim() != 0 || t.dtype() != kInt64) bad(key, "a 0-d int64");
    return t.item<int64_t>();
  }
  double float64(const std::string& key) {
    const Tensor& t = get(key);
    if (t.dim() != 0 || t.dtype() != kFloat64) bad(key, "a 0-d float64");
    return t.item<double>();
  }
  std::vector<double> vec(const std::string& key, size_t n) {
    const Tensor& t = get(key);
    if (t.dtype() != kFloat64 || t.shape() != Shape{static_cast<int64_t>(n)})
      bad(key, fmt::format("a float64 of shape ({})", n));
    return t.to_vector<double>();
  }
  // Throws if any key was never read.
  void finish() const {
    for (const auto& [key, t] : entries_)
      if (!used_.count(key))
        throw ValueError(fmt::format("{}.load_state_dict: unexpected key '{}'", owner_, key));
  }

 private:
  const Tensor& get(const std::string& key) {
    auto it = entries_.find(key);
    if (it == entries_.end() || !it->second.defined())
      throw ValueError(fmt::format("{}.load_state_dict: missing key '{}'", owner_, key));
    used_[key] = true;
    return it->second;
  }
  [[noreturn]] void bad(const std::string& key, const std::string& expected) const {
    const Tensor& t = entries_.at(key);
    throw ValueError(fmt::format("{}.load_state_dict: '{}' is {} {}, expected {}", owner_, key,
                                 dtype_name(t.dtype()), shape_str(t.shape()), expected));
  }
  std::string owner_;
  std::map<std::string, Tensor> entries_;
  std::map<std::string, bool> used_;
};

}  // namespace nabla::optim::detail
