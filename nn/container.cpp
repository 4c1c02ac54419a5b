// Sequential and ModuleList: indexing with checked bounds and typed access.
#include "nabla/nn/container.h"

#include <fmt/format.h>

#include "nabla/core/error.h"

namespace nabla::nn {

namespace detail {
void throw_bad_child_type(const char* container, size_t index, const std::string& actual) {
  throw ValueError(
      fmt::format("{}: module {} is a {}, not the requested type", container, index, actual));
}
void throw_bad_index(const char* container, size_t index, size_t size) {
  throw IndexError(fmt::format("{}: index {} is out of range for size {}", container, index, size));
}
}  // namespace detail

Tensor Sequential::forward(const Tensor& x) const {
  Tensor y = x;
  for (const auto& step : steps_) y = step(y);
  return y;
}

const std::shared_ptr<Module>& Sequential::operator[](size_t i) const {
  if (i >= items_.size()) detail::throw_bad_index("Sequential", i, items_.size());
  return items_[i];
}

const std::shared_ptr<Module>& ModuleList::operator[](size_t i) const {
  if (i >= items_.size()) detail::throw_bad_index("ModuleList", i, items_.size());
  return items_[i];
}

}  // namespace nabla::nn
