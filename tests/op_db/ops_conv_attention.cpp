#include "tests/op_db/op_db.h"

namespace nabla::op_db {
std::vector<OpInfo> conv_attention_ops() { return {}; }
}  // namespace nabla::op_db
