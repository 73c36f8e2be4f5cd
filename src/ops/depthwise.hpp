// Internal: the vector kernel of depthwise 2-D convolutions (src/ops/depthwise.cpp), which
// the Conv kernel (src/ops/conv.cpp) runs plane by plane.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fpguard::ops::depthwise {

// One output plane and how it reads its zero-padded input plane: output (oh, ow) reads
// padded[(oh * stride_h + kh * dil_h) * pitch + ow * stride_w + kw * dil_w] at tap (kh, kw).
struct Plane {
  std::int64_t out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, dil_h, dil_w, pitch;
};

// Floats past the last one an output reads that the kernel may read too (whole vectors at
// the end of a row): the padded plane's buffer must hold them.
constexpr std::size_t kSlack = 256;

// out[oh * out_w + ow] = the sum over the taps, in order (kh, then kw), of w[kh * kernel_w
// + kw] times the input the tap reads, each product rounded and added to the sum so far
// (from 0), then + *bias when bias is not null. Vectorised along the output rows (Highway,
// one build per SIMD target chosen at run time); the sums are the scalar loop's, bit for
// bit, on every target.
void plane(const Plane& p, const float* padded, const float* w, const float* bias, float* out);

}  // namespace fpguard::ops::depthwise
