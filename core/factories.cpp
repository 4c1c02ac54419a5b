// Tensor factories. Random ones draw from a Generator: element i uses counter offset + i, so a
// parallel fill gives the same values as a serial one.
#include <fmt/format.h>

#include <cmath>

#include "nabla/core/copy.h"
#include "nabla/core/error.h"
#include "nabla/core/generator.h"
#include "nabla/core/object_pool.h"
#include "nabla/core/parallel.h"
#include "nabla/core/tensor.h"

namespace nabla {
namespace {

Tensor new_tensor(const Shape& shape, DType dt, bool zero_fill) {
  // Checked first: numel and strides must fit in int64, the byte size in size_t.
  const int64_t n = shape_numel(shape);
  Shape strides = contiguous_strides(shape);
  size_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n), dtype_size(dt), &nbytes))
    throw OutOfMemoryError(
        fmt::format("a {} tensor of shape {} needs {} x {} bytes, more than 2^64", dtype_name(dt),
                    shape_str(shape), n, dtype_size(dt)));
  // Pooled headers (core/object_pool.h): every op's output comes through here.
  auto impl = std::allocate_shared<TensorImpl>(detail::PoolAllocator<TensorImpl>());
  try {
    impl->storage =
        std::allocate_shared<Storage>(detail::PoolAllocator<Storage>(), nbytes, zero_fill);
  } catch (const OutOfMemoryError& e) {
    throw OutOfMemoryError(
        fmt::format("a {} tensor of shape {}: {}", dtype_name(dt), shape_str(shape), e.what()));
  }
  impl->dtype = dt;
  impl->shape = shape;
  impl->strides = std::move(strides);
  return Tensor(impl);
}

// Fills a new contiguous tensor t with value_at(i) for every element i.
template <class F>
Tensor fill(Tensor t, int64_t cost, F&& value_at) {
  dispatch_all(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data_ptr<T>();
    parallel_for(t.numel(), cost, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = static_cast<T>(value_at(i));
    });
  });
  return t;
}

template <class F>
Tensor fill_with(const Shape& shape, DType dt, int64_t cost, F&& value_at) {
  return fill(new_tensor(shape, dt, false), cost, std::forward<F>(value_at));
}

}  // namespace

Tensor empty(const Shape& shape, DType dt) { return new_tensor(shape, dt, false); }
Tensor zeros(const Shape& shape, DType dt) { return new_tensor(shape, dt, true); }
Tensor ones(const Shape& shape, DType dt) { return full(shape, 1.0, dt); }
Tensor full(const Shape& shape, double value, DType dt) {
  check_value_fits("full", value, dt);
  return fill_with(shape, dt, 1, [value](int64_t) { return value; });
}
Tensor scalar_tensor(double value, DType dt) { return full({}, value, dt); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype()); }
Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, t.dtype()); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), t.dtype()); }

Tensor arange(double start, double end, double step, DType dt) {
  auto invalid = [&](const std::string& why) {
    return ValueError(fmt::format("arange: start={} end={} step={}: {}", start, end, step, why));
  };
  if (!std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    throw invalid("every argument must be finite");
  if (step == 0) throw invalid("step must not be 0");
  // The count is checked as a double: casting 1e300 (or an inf from end - start) to int64 is UB.
  const double count = std::ceil((end - start) / step);
  if (!(count < 0x1p62)) throw invalid(fmt::format("{} elements is too many", count));
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  if (n > 0) {
    check_value_fits("arange", start, dt);
    check_value_fits("arange", start + static_cast<double>(n - 1) * step, dt);
  }
  return fill_with({n}, dt, 1, [=](int64_t i) { return start + static_cast<double>(i) * step; });
}
Tensor arange(int64_t end, DType dt) { return arange(0.0, static_cast<double>(end), 1.0, dt); }

Tensor linspace(double start, double end, int64_t steps, DType dt) {
  if (steps < 0) throw ValueError(fmt::format("linspace: steps must be >= 0, got {}", steps));
  if (steps > 0) {
    check_value_fits("linspace", start, dt);
    check_value_fits("linspace", end, dt);
  }
  double h = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  // Fill from both ends so the last element is exactly `end`, as PyTorch does.
  return fill_with({steps}, dt, 1, [=](int64_t i) {
    return i < steps / 2 ? start + h * static_cast<double>(i)
                         : end - h * static_cast<double>(steps - 1 - i);
  });
}

// The random factories allocate before they reserve counters: a shape that cannot be allocated
// throws without moving the generator.
Tensor Generator::uniform(const Shape& shape, double lo, double hi, DType dt) {
  if (!is_floating(dt))
    throw DTypeError(fmt::format("uniform: dtype {} is not floating", dtype_name(dt)));
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi)
    throw ValueError(fmt::format("uniform: expects finite lo <= hi, got [{}, {})", lo, hi));
  Tensor t = new_tensor(shape, dt, false);
  const uint64_t base = advance(static_cast<uint64_t>(t.numel()));
  const double width = hi - lo;
  return fill(t, 20, [&](int64_t i) {
    return lo + width * uniform(base + static_cast<uint64_t>(i));  // exact for (0, 1)
  });
}
Tensor Generator::normal(const Shape& shape, double mean, double std, DType dt) {
  if (!is_floating(dt))
    throw DTypeError(fmt::format("normal: dtype {} is not floating", dtype_name(dt)));
  if (!std::isfinite(mean) || !std::isfinite(std) || std < 0)
    throw ValueError(
        fmt::format("normal: expects finite mean and std >= 0, got mean {} std {}", mean, std));
  Tensor t = new_tensor(shape, dt, false);
  const uint64_t base = advance(static_cast<uint64_t>(t.numel()));
  return fill(t, 40, [&](int64_t i) {
    return mean + std * normal(base + static_cast<uint64_t>(i));  // exact for (0, 1)
  });
}
Tensor rand(const Shape& shape, Generator& gen, DType dt) {
  if (!is_floating(dt))
    throw DTypeError(fmt::format("rand: dtype {} is not floating", dtype_name(dt)));
  return gen.uniform(shape, 0.0, 1.0, dt);
}
Tensor randn(const Shape& shape, Generator& gen, DType dt) {
  if (!is_floating(dt))
    throw DTypeError(fmt::format("randn: dtype {} is not floating", dtype_name(dt)));
  return gen.normal(shape, 0.0, 1.0, dt);
}
Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen) {
  if (high <= low) throw ValueError(fmt::format("randint: empty range [{}, {})", low, high));
  Tensor t = new_tensor(shape, kInt64, false);
  const uint64_t base = gen.advance(static_cast<uint64_t>(t.numel()));
  // In uint64 (modulo 2^64), so [INT64_MIN, INT64_MAX) works: high - low would overflow int64.
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  int64_t* p = t.data_ptr<int64_t>();
  parallel_for(t.numel(), 20, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      p[i] = static_cast<int64_t>(static_cast<uint64_t>(low) +
                                  gen.bits64(base + static_cast<uint64_t>(i)) % range);
  });
  return t;
}
Tensor rand(const Shape& shape, DType dt) { return rand(shape, default_generator(), dt); }
Tensor randn(const Shape& shape, DType dt) { return randn(shape, default_generator(), dt); }
Tensor randint(int64_t low, int64_t high, const Shape& shape) {
  return randint(low, high, shape, default_generator());
}
Tensor randn_like(const Tensor& t) { return randn(t.shape(), t.dtype()); }
Tensor rand_like(const Tensor& t) { return rand(t.shape(), t.dtype()); }

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
  if (shape_numel(shape) != static_cast<int64_t>(values.size()))
    throw ShapeError(fmt::format("from_vector: {} values do not fill shape {}", values.size(),
                                 shape_str(shape)));
  Tensor t = new_tensor(shape, dtype_of<T>(), false);
  T* p = t.data_ptr<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}
template Tensor from_vector<float>(const std::vector<float>&, const Shape&);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&);
template Tensor from_vector<bool>(const std::vector<bool>&, const Shape&);
template Tensor from_vector<bfloat16>(const std::vector<bfloat16>&, const Shape&);
template Tensor from_vector<float16>(const std::vector<float16>&, const Shape&);

Tensor tensor(std::initializer_list<double> values, DType dt) {
  std::vector<double> v(values);
  return from_vector(v, {static_cast<int64_t>(v.size())}).to(dt);
}

Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, DType dt) {
  std::vector<double> v;
  size_t cols = rows.size() ? rows.begin()->size() : 0;
  for (const auto& r : rows) {
    if (r.size() != cols)
      throw ShapeError(fmt::format("tensor: ragged rows ({} and {} values)", cols, r.size()));
    v.insert(v.end(), r.begin(), r.end());
  }
  return from_vector(v, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols)}).to(dt);
}

}  // namespace nabla
