// InlineVector<T, N>: the part of std::vector's interface an autograd node's per-input fields
// use (Node::next, Node::input_shapes), with up to N elements stored in the object itself, for
// any T (SmallVector, core/small_vector.h, holds only trivially copyable values). As
// std::vectors those fields cost two heap blocks per recorded op, which outlive the forward pass
// and so miss glibc's per-thread cache: callgrind put malloc and free at a third of a recorded
// add's instructions (docs/perf.md). Past N elements everything moves to a std::vector.
#pragma once
#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace nabla {

template <class T, size_t N>
class InlineVector {
 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  InlineVector() = default;
  ~InlineVector() { destroy_inline(); }
  // A node's fields are never copied or moved as a whole.
  InlineVector(const InlineVector&) = delete;
  InlineVector& operator=(const InlineVector&) = delete;

  T* data() { return spilled_ ? heap_.data() : inline_data(); }
  const T* data() const { return spilled_ ? heap_.data() : inline_data(); }
  size_t size() const { return spilled_ ? heap_.size() : size_; }
  bool empty() const { return size() == 0; }
  iterator begin() { return data(); }
  iterator end() { return data() + size(); }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& back() { return data()[size() - 1]; }
  const T& back() const { return data()[size() - 1]; }

  void reserve(size_t n) {
    if (n > N) spill(n);
  }
  template <class... Args>
  T& emplace_back(Args&&... args) {
    if (!spilled_ && size_ == N) spill(2 * N);
    if (spilled_) return heap_.emplace_back(std::forward<Args>(args)...);
    T* slot = ::new (inline_data() + size_) T(std::forward<Args>(args)...);
    ++size_;
    return *slot;
  }
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  void clear() {
    destroy_inline();
    heap_.clear();
  }
  // A copy as a std::vector, for code that keeps the values.
  std::vector<T> to_vector() const { return std::vector<T>(begin(), end()); }

 private:
  T* inline_data() { return std::launder(reinterpret_cast<T*>(storage_)); }
  const T* inline_data() const { return std::launder(reinterpret_cast<const T*>(storage_)); }
  void destroy_inline() {
    std::destroy(inline_data(), inline_data() + size_);
    size_ = 0;
  }
  // Moves the inline elements to heap_, which from now on holds every element.
  void spill(size_t capacity) {
    if (spilled_) {
      heap_.reserve(capacity);
      return;
    }
    heap_.reserve(std::max(capacity, size_));
    for (size_t i = 0; i < size_; ++i) heap_.push_back(std::move(inline_data()[i]));
    destroy_inline();
    spilled_ = true;
  }

  alignas(T) std::byte storage_[N * sizeof(T)];
  size_t size_ = 0;  // elements in storage_ (0 once spilled)
  bool spilled_ = false;
  std::vector<T> heap_;
};

}  // namespace nabla
