// ops/kernels/onednn.cpp compiled as in a build without oneDNN (NABLA_WITH_ONEDNN=0): every
// entry point must throw a nabla::Error that names it and says how to get oneDNN, never crash.
// nn::quantize_dynamic and QuantizedLinear call onednn::require first, so they say the same.
#include <catch2/catch.hpp>

#include "nabla/core/error.h"
#include "nabla/ops/kernels/onednn.h"

using namespace nabla;
using Catch::Matchers::Contains;

TEST_CASE("onednn missing: every entry point says so", "[onednn]") {
  CHECK_FALSE(onednn::available());
  CHECK(onednn::describe() == "not built with oneDNN");
  // Catch2 v2 matchers combined with && hold references: spelled out in each check.
#define MISSING Contains("built without oneDNN") && Contains("libdnnl-dev")
  CHECK_THROWS_WITH(onednn::require("nn::quantize_dynamic"),
                    Contains("nn::quantize_dynamic") && MISSING);
  CHECK_THROWS_AS(onednn::require("x"), Error);
  float c = 0;
  CHECK_THROWS_WITH(
      onednn::matmul_bf16(onednn::Bf16Matmul::dense(1, 1, 1, 1), nullptr, nullptr, &c),
      Contains("onednn::matmul_bf16") && MISSING);
  CHECK_THROWS_WITH(onednn::sgemm(false, false, 1, 1, 1, 1.0f, &c, 1, &c, 1, 0.0f, &c, 1, false),
                    Contains("onednn::sgemm") && MISSING);
  CHECK_THROWS_WITH(onednn::linear_u8s8({}, nullptr, nullptr, nullptr, nullptr, &c),
                    Contains("onednn::linear_u8s8") && MISSING);
  const int8_t w = 1;
  const float s = 1.0f;
  CHECK_THROWS_WITH(onednn::PackedInt8Weights(1, 1, &w, &s),
                    Contains("onednn::PackedInt8Weights") && MISSING);
  CHECK_THROWS_WITH(onednn::linear_u8s8({}, nullptr, onednn::PackedInt8Weights(), nullptr, &c),
                    Contains("onednn::linear_u8s8") && MISSING);
  CHECK(onednn::cache_stats().size == 0);
  CHECK(onednn::last_call_threads() == 0);
}
