// Internals of nabla::dist shared with DistributedDataParallel (not part of the public API).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nabla/nn/distributed/dist.h"

namespace nabla::dist::detail {

// all_reduce_async without the metadata check (the caller has checked every rank's layout once):
// `flat` is contiguous and of a wire dtype (float32, float64, int64, bool). `what` names it.
Work all_reduce_flat_async(Tensor flat, ReduceOp op, bool rank_order, std::string what);
// Every rank's bytes, in rank order (lengths may differ).
std::vector<std::string> all_gather_bytes(const std::string& mine, const char* what);
// Marks the communicator unusable: later collectives throw, the InitGuard aborts.
void mark_broken(const std::string& why);
bool broken();
// `bytes` bytes at `data` become root's on every rank (no metadata check); waits.
void broadcast_bytes(void* data, int64_t bytes, int root, const std::string& what);

}  // namespace nabla::dist::detail
