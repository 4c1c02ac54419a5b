// The one header a nabla user includes.
#pragma once

#include "core/autograd.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/gradcheck.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "ops/activation.h"
#include "ops/arithmetic.h"
#include "ops/compare.h"
#include "ops/linalg.h"
#include "ops/pointwise.h"
#include "ops/reduce.h"
#include "ops/reduce_dim.h"
#include "ops/statistics.h"
#include "ops/unary.h"
