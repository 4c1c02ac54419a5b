// Element types and the one dispatch helper that turns a runtime dtype into a C++ type.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "nabla/core/error.h"

namespace nabla {

enum class DType : uint8_t { Float32, Float64, Int64, Bool };

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kBool = DType::Bool;

size_t dtype_size(DType dt);
const char* dtype_name(DType dt);
inline bool is_floating(DType dt) { return dt == DType::Float32 || dt == DType::Float64; }
// Throws ValueError naming `op` when `value` cannot be stored in dtype `dt`: a NaN, an infinity
// or a number outside [-2^63, 2^63) for int64 (converting one is undefined behaviour).
void check_value_fits(const char* op, double value, DType dt);

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::Float32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::Float64;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::Int64;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::Bool;
}

// Calls f(T{}) with T = float or double; anything else is a DTypeError naming `op`.
template <class F>
decltype(auto) dispatch_float(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    default:
      throw DTypeError(std::string(op) + ": expected a floating dtype (float32 or float64), got " +
                       dtype_name(dt) + "; convert with .to(kFloat32)");
  }
}

// Calls f(T{}) with T = float, double or int64_t (arithmetic types).
template <class F>
decltype(auto) dispatch_numeric(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    case DType::Int64:
      return f(int64_t{});
    default:
      throw DTypeError(std::string(op) + ": expected a numeric dtype, got " + dtype_name(dt));
  }
}

// Calls f(T{}) for every dtype.
template <class F>
decltype(auto) dispatch_all(DType dt, F&& f) {
  switch (dt) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    case DType::Int64:
      return f(int64_t{});
    case DType::Bool:
      return f(bool{});
  }
  throw DTypeError("unknown dtype");
}

}  // namespace nabla
