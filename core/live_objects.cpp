#include "core/live_objects.h"

#include <fmt/format.h>

namespace nabla {
namespace detail {

// Constant-initialised (constexpr atomic constructor), so objects created during static
// initialisation elsewhere are counted too.
LiveCounter live_tensor_impls, live_storages, live_nodes;

}  // namespace detail

LiveObjects live_objects() {
  return {detail::live_tensor_impls.count.load(std::memory_order_relaxed),
          detail::live_storages.count.load(std::memory_order_relaxed),
          detail::live_nodes.count.load(std::memory_order_relaxed)};
}

std::string to_string(const LiveObjects& live) {
  return fmt::format("tensors {}, storages {}, nodes {}", live.tensor_impls, live.storages,
                     live.nodes);
}

}  // namespace nabla
