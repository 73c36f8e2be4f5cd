// Internal: the vector kernel of depthwise 2-D convolutions (src/ops/depthwise.cpp), which
// the Conv kernel (src/ops/conv.cpp) runs plane by plane.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/epilogue.hpp"
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
// scalar loop's, bit for bit, on every target. Then the epilogue, when not null, on the
// plane's outputs (on one thread; a Relu or HardSwish, ops::ExactEpilogue, on each vector of
// outputs before it is stored).
void plane(const Plane& p, const float* in, const float* w, const float* bias,
           const Epilogue* epilogue, float* out, float* scratch);

// The channels channel_block() computes together: the lanes of a vector on the SIMD target
// chosen at run time (16 with AVX-512, 8 with AVX2; 1 without vectors, where it must not
// be called).
std::size_t block_channels();
// The floats of scratch that channel_block() needs for p (per thread).
std::size_t block_scratch_floats(const Plane& p);
// Whether channel_block() runs p faster than plane(): rows narrower than a vector (where
// plane() fills few of its lanes), or a kernel other than plane()'s unrolled 3 x 3 on
// planes of at most 32 x 32 outputs, when its scratch stays within an L2 cache (512 KiB)
// and the vector has 16 lanes (AVX-512: measured on MobileNetV3's layers, bench/README.md,
// session 26; AVX2 was not).
bool prefer_block(const Plane& p);

// plane()'s output rows [oh0, oh1) for `channels` (1 to block_channels()) channels
// together, channel c's input plane at in + c * in_stride, its taps at w + c * kernel_h *
// kernel_w, its bias at bias[c] (bias may be null) and its output plane at out + c *
// out_stride; then the epilogue, when not null, on those outputs (on one thread; an
// ops::ExactEpilogue on each vector of outputs before it is stored). The
// vector's lanes are the channels: the input rows that the output rows read are transposed
// into the scratch (zero-padded positions of L channels each), every output is plane()'s
// sum, bit for bit, and the outputs are transposed back.
void channel_block(const Plane& p, std::int64_t channels, std::int64_t oh0, std::int64_t oh1,
                   const float* in, std::int64_t in_stride, const float* w, const float* bias,
                   float* out, std::int64_t out_stride, const Epilogue* epilogue, float* scratch);

}  // namespace fpguard::ops::depthwise
