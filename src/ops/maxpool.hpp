// Internal: the vector kernel of 2-D max pooling without indices (src/ops/maxpool.cpp),
// which the MaxPool kernel (src/ops/conv.cpp) runs plane by plane.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ops/window2d.hpp"

namespace fpguard::ops::maxpool {

// One input plane and the output plane pooled from it (ops/window2d.hpp): a tap outside
// the input is not read. Every output column must read at least one input column
// (separable(): then the pool is the fold over rows of folds over columns).
using Plane = Window2D;

// The maximum as MaxPool takes it: a NaN tap wins, a larger one wins, a tie keeps the
// earlier. Folded over taps in order, it gives the last NaN if any, else the first of the
// largest: so a fold over rows of folds over columns gives the same tap, bit for bit.
template <class T>
T take(T v, T acc) {
  return v > acc || std::isnan(v) ? v : acc;
}

// Whether every output column reads at least one input column.
bool separable(const Plane& p);

// The values of scratch that plane() needs for p (per thread; its contents do not matter).
std::size_t scratch_values(const Plane& p);

// out[oh * out_w + ow] = the fold with take() of the taps output (oh, ow) reads, in order
// (kh, then kw), -inf where it reads none: each input row folded over the columns each
// output column reads (into scratch), then each output row the fold of the rows its window
// reads. Vectorised along the rows for strides 1 and 2 (Highway, one build per SIMD target
// chosen at run time); the same comparisons as the scalar fold, so its bits, NaN payloads
// and signed zeros included, on every target.
void plane(const Plane& p, const float* in, float* out, float* scratch);
void plane(const Plane& p, const double* in, double* out, double* scratch);

}  // namespace fpguard::ops::maxpool
