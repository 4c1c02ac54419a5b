// The one header a nabla user includes.
#pragma once

#include "core/autograd.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/gradcheck.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "ops/arithmetic.h"
#include "ops/compare.h"
#include "ops/dropout.h"
#include "ops/layer_norm.h"
#include "ops/linalg.h"
#include "ops/linear.h"
#include "ops/loss.h"
#include "ops/reduce.h"
#include "ops/softmax.h"
#include "ops/unary.h"
