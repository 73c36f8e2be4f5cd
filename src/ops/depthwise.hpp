// Internal: the vector kernel of depthwise 2-D convolutions (src/ops/depthwise.cpp), which
// the Conv kernel (src/ops/conv.cpp) runs plane by plane.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/window2d.hpp"

namespace fpguard::ops::depthwise {

// One input plane and the output plane made from it (ops/window2d.hpp); the input is
// zero-padded: a tap outside it reads 0.
using Plane = Window2D;

// The floats of scratch that plane() needs for p (per thread; its contents do not matter).
std::size_t scratch_floats(const Plane& p);

// out[oh * out_w + ow] = the sum over the taps, in order (kh, then kw), of w[kh * kernel_w
// + kw] times the input the tap reads (0 in the padding), each product rounded and added
// to the sum so far (from 0), then + *bias when bias is not null. Vectorised along the
// output rows (Highway, one build per SIMD target chosen at run time); the sums are the
// scalar loop's, bit for bit, on every target.
void plane(const Plane& p, const float* in, const float* w, const float* bias, float* out,
           float* scratch);

}  // namespace fpguard::ops::depthwise
