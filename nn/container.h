// Containers: Sequential (chains modules whose forward maps a Tensor to a Tensor) and ModuleList
// (holds modules, no forward). Children are named "0", "1", ... as in PyTorch.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nabla/nn/module.h"

namespace nabla::nn {

namespace detail {
[[noreturn]] void throw_bad_child_type(const char* container, size_t index,
                                       const std::string& actual);
[[noreturn]] void throw_bad_index(const char* container, size_t index, size_t size);
// Casts a child to M or throws ValueError naming the child's type.
template <class M>
std::shared_ptr<M> child_as(const char* container, size_t index, const std::shared_ptr<Module>& m) {
  auto typed = std::dynamic_pointer_cast<M>(m);
  if (!typed) throw_bad_child_type(container, index, m->name());
  return typed;
}
}  // namespace detail

class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  // Sequential(std::make_shared<Linear>(6, 16), std::make_shared<Tanh>(), ...)
  template <class... Ms>
  explicit Sequential(std::shared_ptr<Ms>... modules) : Module("Sequential") {
    (push_back(std::move(modules)), ...);
  }

  // Appends a module with `Tensor forward(const Tensor&)` under the next index.
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    M* raw = module.get();  // owned by the children list for this container's lifetime
    register_module(std::to_string(items_.size()), module);
    items_.push_back(module);
    // Through operator() when the module has one (hooks and scopes), as PyTorch calls children.
    steps_.push_back([raw](const Tensor& x) -> Tensor {
      if constexpr (requires { (*raw)(x); })
        return (*raw)(x);
      else
        return raw->forward(x);
    });
    return module;
  }

  // Applies every module in order (the identity when empty).
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return call(&Sequential::forward, x); }

  size_t size() const { return items_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const;
  template <class M>
  std::shared_ptr<M> at(size_t i) const {
    return detail::child_as<M>("Sequential", i, (*this)[i]);
  }

 private:
  std::vector<std::shared_ptr<Module>> items_;
  std::vector<std::function<Tensor(const Tensor&)>> steps_;
};

class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}

  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    register_module(std::to_string(items_.size()), module);
    items_.push_back(module);
    return module;
  }

  size_t size() const { return items_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const;
  template <class M>
  std::shared_ptr<M> at(size_t i) const {
    return detail::child_as<M>("ModuleList", i, (*this)[i]);
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

}  // namespace nabla::nn
