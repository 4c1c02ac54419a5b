#include "nabla/core/dtype.h"

#include <fmt/format.h>

#include <string_view>

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
    case DType::BFloat16:
    case DType::Float16:
      return 2;
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
    case DType::BFloat16:
      return "bfloat16";
    case DType::Float16:
      return "float16";
  }
  return "unknown";
}

void throw_unsupported_dtype(const char* op, const char* expected, DType dt) {
  if (is_reduced_float(dt))
    throw DTypeError(fmt::format(
        "{}: has no {} kernel ({} is a storage dtype, computed in float32 only by the ops that "
        "support it); convert with .to(kFloat32)",
        op, dtype_name(dt), dtype_name(dt)));
  const bool wants_float = std::string_view(expected).starts_with("a floating");
  throw DTypeError(fmt::format("{}: expected {}, got {}{}", op, expected, dtype_name(dt),
                               wants_float ? "; convert with .to(kFloat32)" : ""));
}

DType promote_types(const char* op, DType a, DType b) {
  if (a == b) return a;
  if (is_floating(a) && is_floating(b)) {
    if (is_reduced_float(a) && is_reduced_float(b)) return DType::Float32;  // bf16 with f16
    if (is_reduced_float(a)) return b;
    if (is_reduced_float(b)) return a;
  }
  throw DTypeError(fmt::format("{}: dtype mismatch, {} vs {}; convert one with .to()", op,
                               dtype_name(a), dtype_name(b)));
}

void check_value_fits(const char* op, double value, DType dt) {
  if (dt != DType::Int64) return;  // floats hold any double (as +-inf at worst), bool any value
  if (!(value >= -0x1p63 && value < 0x1p63))
    throw ValueError(fmt::format("{}: value {} does not fit in int64", op, value));
}

}  // namespace nabla
