#include "examples/common/weight_average.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "nabla/core/autograd.h"
#include "nabla/core/error.h"

namespace nabla::examples {

WeightAverage::WeightAverage(const nn::Module& model, double decay)
    : Module("WeightAverage"), params_(model.parameters()), decay_(decay) {
  if (!(decay >= 0.0 && decay < 1.0))
    throw ValueError(fmt::format("WeightAverage: decay must be in [0, 1), got {}", decay));
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (p.dtype() != DType::Float32 || !p.is_contiguous())
      throw ValueError(
          fmt::format("WeightAverage: parameter {} must be contiguous float32 (dtype {})", i,
                      dtype_name(p.dtype())));
    averages_.push_back(register_buffer(fmt::format("p{}", i), p.detach().clone()));
  }
  updates_ = register_buffer("updates", from_vector(std::vector<int64_t>{0}, {1}));
}

int64_t WeightAverage::updates() const { return updates_.data_ptr<int64_t>()[0]; }

void WeightAverage::update() {
  const int64_t n = updates();
  const double d =
      std::min(decay_, (1.0 + static_cast<double>(n)) / (10.0 + static_cast<double>(n)));
  const auto keep = static_cast<float>(d), take = static_cast<float>(1.0 - d);
  for (size_t i = 0; i < params_.size(); ++i) {
    const float* p = params_[i].data_ptr<float>();
    float* a = averages_[i].data_ptr<float>();
    const int64_t size = params_[i].numel();
    for (int64_t k = 0; k < size; ++k) a[k] = keep * a[k] + take * p[k];
  }
  updates_.data_ptr<int64_t>()[0] = n + 1;
}

void WeightAverage::swap() {
  for (size_t i = 0; i < params_.size(); ++i) {
    float* p = params_[i].data_ptr<float>();
    float* a = averages_[i].data_ptr<float>();
    std::swap_ranges(p, p + params_[i].numel(), a);
  }
}

}  // namespace nabla::examples
