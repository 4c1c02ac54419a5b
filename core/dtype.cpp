#include "nabla/core/dtype.h"

#include <fmt/format.h>

namespace nabla {

size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::Float32:
      return 4;
    case DType::Float64:
      return 8;
    case DType::Int64:
      return 8;
    case DType::Bool:
      return 1;
  }
  return 0;
}

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
    case DType::Int64:
      return "int64";
    case DType::Bool:
      return "bool";
  }
  return "unknown";
}

void check_value_fits(const char* op, double value, DType dt) {
  if (dt != DType::Int64) return;  // floats hold any double (as +-inf at worst), bool any value
  if (!(value >= -0x1p63 && value < 0x1p63))
    throw ValueError(fmt::format("{}: value {} does not fit in int64", op, value));
}

}  // namespace nabla
