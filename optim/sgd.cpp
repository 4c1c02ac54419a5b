// optim::SGD. Per element, with g the gradient and b the momentum buffer:
//   g = g + weight_decay * p
//   b = g (first step) | b * momentum + (1 - dampening) * g
//   g = g + momentum * b (nesterov) | b
//   p = p - lr * g
// State: "momentum_buffer" (only when momentum != 0).
#include "nabla/optim/sgd.h"

#include <fmt/format.h>

#include "nabla/core/error.h"
#include "nabla/core/parallel.h"

namespace nabla::optim {

namespace {

template <class T>
void sgd_kernel(T* p, const T* g, T* buf, bool first, int64_t begin, int64_t end,
                const SGDOptions& o, double lr) {
  const T wd = static_cast<T>(o.weight_decay), mom = static_cast<T>(o.momentum);
  const T keep = static_cast<T>(1 - o.dampening), neg_lr = static_cast<T>(-lr);
  for (int64_t i = begin; i < end; ++i) {
    T d = g[i];
    if (o.weight_decay != 0) d = d + wd * p[i];
    if (o.momentum != 0) {
      buf[i] = first ? d : buf[i] * mom + keep * d;
      d = o.nesterov ? d + mom * buf[i] : buf[i];
    }
    p[i] = p[i] + neg_lr * d;
  }
}

std::vector<ParamGroup> one_group(std::vector<Tensor> params) {
  return {ParamGroup{std::move(params)}};
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options)
    : SGD(one_group(std::move(params)), options) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& options)
    : Optimizer("SGD", std::move(groups), options.lr, options.weight_decay), options_(options) {
  if (!(options.momentum >= 0))
    throw ValueError(fmt::format("SGD: invalid momentum {}", options.momentum));
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0))
    throw ValueError(
        fmt::format("SGD: nesterov needs momentum > 0 and dampening = 0, got momentum {} and "
                    "dampening {}",
                    options.momentum, options.dampening));
}

std::vector<std::string> SGD::state_keys() const {
  if (options_.momentum == 0) return {};
  return {"momentum_buffer"};
}

void SGD::update(const ParamGroup& group, Tensor& p, const Tensor& grad, ParamState& state) {
  SGDOptions o = options_;
  o.weight_decay = group.weight_decay;
  bool first = false;
  Tensor buf;
  if (o.momentum != 0) {
    Tensor& b = state["momentum_buffer"];
    first = !b.defined();
    if (first) b = empty(p.shape(), p.dtype());
    buf = b;
  }
  dispatch_float(p.dtype(), "SGD.step", [&](auto tag) {
    using T = decltype(tag);
    T* pp = p.data_ptr<T>();
    const T* gp = grad.data_ptr<T>();
    T* bp = buf.defined() ? buf.data_ptr<T>() : nullptr;
    parallel_for(p.numel(), 8, [&](int64_t b, int64_t e) {
      sgd_kernel<T>(pp, gp, bp, first, b, e, o, group.lr);
    });
  });
}

}  // namespace nabla::optim
