// Internal: the vector kernel of depthwise 2-D convolutions (src/ops/depthwise.cpp), which
// the Conv kernel (src/ops/conv.cpp) runs plane by plane.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fpguard::ops::depthwise {

// One input plane (in_h x in_w, zero-padded by pad_top rows above and pad_left columns on
// the left, and by zeros wherever else a tap falls outside it) and the output plane made
// from it: output (oh, ow) reads input (oh * stride_h + kh * dil_h - pad_top, ow *
// stride_w + kw * dil_w - pad_left) at tap (kh, kw).
struct Plane {
  std::int64_t in_h, in_w, pad_top, pad_left;
  std::int64_t out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, dil_h, dil_w;
};

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
