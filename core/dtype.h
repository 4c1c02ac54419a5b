// Element types and the one dispatch helper that turns a runtime dtype into a C++ type.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "nabla/core/error.h"
#include "nabla/core/half.h"

namespace nabla {

// BFloat16 and Float16 are storage types (core/half.h): ops compute on them in float32 and round
// once (ops/reduced_float.h); kernels that only move bytes handle them directly.
enum class DType : uint8_t { Float32, Float64, Int64, Bool, BFloat16, Float16 };

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kBool = DType::Bool;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat16 = DType::Float16;

size_t dtype_size(DType dt);
const char* dtype_name(DType dt);
inline bool is_reduced_float(DType dt) { return dt == DType::BFloat16 || dt == DType::Float16; }
inline bool is_floating(DType dt) {
  return dt == DType::Float32 || dt == DType::Float64 || is_reduced_float(dt);
}
// PyTorch's type promotion among floating dtypes: the same dtype stays; bfloat16 with float16
// gives float32; a reduced float with float32 or float64 gives that. Any other pair (int64 or
// bool with a float) is a DTypeError naming `op` and both dtypes, as nabla does not promote them.
DType promote_types(const char* op, DType a, DType b);
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
template <>
constexpr DType dtype_of<bfloat16>() {
  return DType::BFloat16;
}
template <>
constexpr DType dtype_of<float16>() {
  return DType::Float16;
}

// The error of an op that has no kernel for a dtype: names the op and the dtype, and for
// bfloat16/float16 (storage types) says to compute in float32.
[[noreturn]] void throw_unsupported_dtype(const char* op, const char* expected, DType dt);

// Calls f(T{}) with T = float or double; anything else is a DTypeError naming `op`.
template <class F>
decltype(auto) dispatch_float(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    default:
      throw_unsupported_dtype(op, "a floating dtype (float32 or float64)", dt);
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
      throw_unsupported_dtype(op, "a numeric dtype", dt);
  }
}

// Calls f(T{}) with T = float, double, bfloat16 or float16: for code that only loads and stores
// floating values (through float for the 16-bit types), such as the engine's gradient sums.
template <class F>
decltype(auto) dispatch_floating(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    case DType::BFloat16:
      return f(bfloat16{});
    case DType::Float16:
      return f(float16{});
    default:
      throw_unsupported_dtype(op, "a floating dtype", dt);
  }
}

// Calls f(T{}) for every dtype (the 16-bit floats as their storage types).
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
    case DType::BFloat16:
      return f(bfloat16{});
    case DType::Float16:
      return f(float16{});
  }
  throw DTypeError("unknown dtype");
}

}  // namespace nabla
