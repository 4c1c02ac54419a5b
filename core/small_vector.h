// SmallVector<T, N>: std::vector's interface for trivially copyable T, with up to N elements kept
// inline. Shapes and strides are SmallVector<int64_t, 6>: a tensor of up to six dims costs no heap
// allocation for its metadata, which is most of what a tiny op costs. It converts implicitly to
// and from std::vector<T>, so APIs that take dims as std::vector keep working.
#pragma once
#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace nabla {

template <class T, size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector holds trivially copyable values");

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  SmallVector() = default;
  explicit SmallVector(size_t n, const T& value = T()) { assign(n, value); }
  SmallVector(std::initializer_list<T> init) { assign(init.begin(), init.end()); }
  template <std::input_iterator It>
  SmallVector(It first, It last) {
    assign(first, last);
  }
  SmallVector(const std::vector<T>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit
  SmallVector(const SmallVector& o) { copy_from(o); }
  SmallVector(SmallVector&& o) noexcept { take(std::move(o)); }
  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) copy_from(o);
    return *this;
  }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this != &o) take(std::move(o));
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> init) {
    assign(init.begin(), init.end());
    return *this;
  }
  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }  // NOLINT: implicit

  T* data() { return heap_ ? heap_.get() : inline_; }
  const T* data() const { return heap_ ? heap_.get() : inline_; }
  size_t size() const { return size_; }
  size_t capacity() const { return heap_ ? capacity_ : N; }
  bool empty() const { return size_ == 0; }

  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  const_iterator cbegin() const { return begin(); }
  const_iterator cend() const { return end(); }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }

  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& at(size_t i) {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data()[i];
  }
  const T& at(size_t i) const {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data()[i];
  }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  void reserve(size_t n) {
    if (n <= capacity()) return;
    auto grown = std::make_unique<T[]>(n);
    std::copy(begin(), end(), grown.get());
    heap_ = std::move(grown);
    capacity_ = n;
  }
  void clear() { size_ = 0; }
  void resize(size_t n, const T& value = T()) {
    reserve(n);
    if (n > size_) std::fill(data() + size_, data() + n, value);
    size_ = n;
  }
  void assign(size_t n, const T& value) {
    size_ = 0;
    resize(n, value);
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    clear();
    if constexpr (std::forward_iterator<It>) {  // one copy, not a push_back per element
      const auto n = static_cast<size_t>(std::distance(first, last));
      reserve(n);  // a range inside this vector fits: nothing reallocates under it
      std::copy(first, last, data());
      size_ = n;
    } else {
      for (; first != last; ++first) push_back(*first);
    }
  }
  void push_back(const T& v) {
    if (size_ == capacity()) reserve(std::max<size_t>(2 * capacity(), 1));
    data()[size_++] = v;
  }
  template <class... Args>
  T& emplace_back(Args&&... args) {
    push_back(T(std::forward<Args>(args)...));
    return back();
  }
  void pop_back() { --size_; }

  iterator insert(const_iterator pos, const T& v) { return insert(pos, size_t{1}, v); }
  iterator insert(const_iterator pos, size_t n, const T& v) {
    const size_t at = static_cast<size_t>(pos - begin());
    reserve(size_ + n);
    T* d = data();
    std::move_backward(d + at, d + size_, d + size_ + n);
    std::fill(d + at, d + at + n, v);
    size_ += n;
    return d + at;
  }
  template <std::input_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    const size_t at = static_cast<size_t>(pos - begin());
    const std::vector<T> items(first, last);  // the range may alias this vector
    reserve(size_ + items.size());
    T* d = data();
    std::move_backward(d + at, d + size_, d + size_ + items.size());
    std::copy(items.begin(), items.end(), d + at);
    size_ += items.size();
    return d + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<T> init) {
    return insert(pos, init.begin(), init.end());
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    T* d = data();
    const auto from = static_cast<size_t>(first - d), to = static_cast<size_t>(last - d);
    std::copy(d + to, d + size_, d + from);
    size_ -= to - from;
    return d + from;
  }
  void swap(SmallVector& o) noexcept {
    SmallVector t(std::move(o));
    o = std::move(*this);
    *this = std::move(t);
  }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    if (a.size_ != b.size_) return false;
    for (size_t i = 0; i < a.size_; ++i)  // a few dims: a loop beats a call to memcmp
      if (!(a[i] == b[i])) return false;
    return true;
  }
  friend bool operator==(const SmallVector& a, const std::vector<T>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend auto operator<=>(const SmallVector& a, const SmallVector& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  // Up to N elements: all N slots are copied, a fixed-size copy the compiler inlines (a shape is
  // copied several times per op; a call to memcpy for 1-2 dims cost more than the copy). Both
  // sides have room for N: inline storage, or a heap block grown past N.
  void copy_from(const SmallVector& o) {
    if (o.size_ <= N) {
      std::memcpy(static_cast<void*>(data()), o.data(), N * sizeof(T));
    } else {
      size_ = 0;
      reserve(o.size_);
      std::memcpy(static_cast<void*>(data()), o.data(), o.size_ * sizeof(T));
    }
    size_ = o.size_;
  }
  void take(SmallVector&& o) {
    if (o.heap_) {
      heap_ = std::move(o.heap_);
      capacity_ = o.capacity_;
      size_ = o.size_;
    } else {
      heap_.reset();
      std::copy(o.inline_, o.inline_ + o.size_, inline_);
      size_ = o.size_;
    }
    o.size_ = 0;
  }

  T inline_[N]{};
  std::unique_ptr<T[]> heap_;
  size_t size_ = 0;
  size_t capacity_ = 0;  // of heap_
};

}  // namespace nabla
