// Internal: a 2-D window over one plane, as the vector kernels of src/ops/depthwise.cpp and
// src/ops/maxpool.cpp take it.
#pragma once

#include <cstdint>

namespace fpguard::ops {

// One input plane (in_h x in_w) and the output plane made from it: output (oh, ow) reads
// input (oh * stride_h + kh * dil_h - pad_top, ow * stride_w + kw * dil_w - pad_left) at
// tap (kh, kw).
struct Window2D {
  std::int64_t in_h, in_w, pad_top, pad_left;
  std::int64_t out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, dil_h, dil_w;
};

// The window of a 2-D geometry `g` (a Conv's, a pool's): its in, out, kernel, stride,
// dilation and pad_begin, two values each.
template <class G>
Window2D window2d(const G& g) {
  return {.in_h = g.in[0],
          .in_w = g.in[1],
          .pad_top = g.pad_begin[0],
          .pad_left = g.pad_begin[1],
          .out_h = g.out[0],
          .out_w = g.out[1],
          .kernel_h = g.kernel[0],
          .kernel_w = g.kernel[1],
          .stride_h = g.stride[0],
          .stride_w = g.stride[1],
          .dil_h = g.dilation[0],
          .dil_w = g.dilation[1]};
}

}  // namespace fpguard::ops
