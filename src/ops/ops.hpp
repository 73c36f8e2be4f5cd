// Internal: helpers shared by the kernel files of src/ops and their registration
// functions (one per family, called by Registry::global).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "fpguard/error.hpp"
#include "fpguard/exec.hpp"
#include "ops/epilogue.hpp"

namespace fpguard::ops {

using exec::Degree;
using exec::KernelContext;
using exec::OpKind;
using exec::Registry;
using Shape = std::vector<std::int64_t>;

void register_elementwise(Registry& r);
// Threads of oneDNN's OpenMP pool (process-wide).
void set_blas_threads(int threads);
// C = alpha op(A) op(B) + beta C, row-major (op transposes when ta/tb): oneDNN's sgemm
// for float, the experiments layer's float64 FMA kernel (the truth of gemm-error) for
// double, or, when ctx.accumulate is set, every partial sum rounded into that format in
// ctx.accumulation's order. MatMul, Gemm, Conv and ConvTranspose all go through it.
void gemm(const KernelContext& ctx, bool ta, bool tb, std::int64_t m, std::int64_t n,
          std::int64_t k, float alpha, const float* a, std::int64_t lda, const float* b,
          std::int64_t ldb, float beta, float* c, std::int64_t ldc);
void gemm(const KernelContext& ctx, bool ta, bool tb, std::int64_t m, std::int64_t n,
          std::int64_t k, double alpha, const double* a, std::int64_t lda, const double* b,
          std::int64_t ldb, double beta, double* c, std::int64_t ldc);
// Conv geometry (batch n, channels c -> m, groups, per spatial dim: input, kernel,
// stride, dilation, begin pad, output), as the Conv kernel resolved it.
struct ConvGeometry {
  std::int64_t n, c, m, group;
  std::vector<std::int64_t> in, kernel, stride, dilation, pad_begin, out;
};
// Conv's geometry from X's and W's shapes and the node's attributes (kernel_shape, pads,
// auto_pad, strides, dilations, group), validated; ConvInteger and QLinearConv share it.
ConvGeometry conv_geometry(const KernelContext& ctx, const Shape& x, const Shape& w);
// im2col of one input plane: row r = kernel offset, column = output position; positions
// in the padding are 0 (float, double and int32: the quantized convs pad with 0 after
// subtracting the zero point).
template <class T>
void im2col(const ConvGeometry& g, const T* plane, T* col);
// start + the sum of term(v[0]), ..., term(v[n - 1]) as the reductions take it along a
// run of values: eight interleaved partial sums (lane j: terms j, j + 8, ...; vectorised),
// then added in order to `start`. ReduceSum, ReduceMean and the other sums share it with
// GlobalAveragePool, which is ReduceMean over the spatial axes bit for bit.
template <class T, class Term>
T add_in_eights(T start, const T* v, std::int64_t n, Term term) {
  T part[8] = {};
  std::int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int j = 0; j < 8; ++j) part[j] += term(v[k + j]);
  for (; k < n; ++k) part[k % 8] += term(v[k]);
  for (const T q : part) start += q;
  return start;
}
// A thread's buffer of at least `bytes` (64-byte aligned, contents unspecified) for one use,
// grown to the largest that thread asked for and kept: the convolutions' blocked copies of X
// and Y for oneDNN, the depthwise kernels' strips and the pointwise kernel's panels were
// allocated anew on every call (above malloc's mmap threshold: mapped and unmapped each
// time, on every thread).
enum class Scratch { conv_x, conv_y, depthwise, pointwise, count };
void* thread_scratch(Scratch use, std::size_t bytes);
// Conv of float32 NC... tensors on oneDNN's convolution primitive (bias optional, may be
// null); false when it does not apply (1-3 spatial dims, float32 accumulation) or oneDNN
// offers no implementation: the caller then uses im2col + gemm. `w` (float32) is read
// only to prepare the primitive: a prepared weight's values are not asked for again.
bool conv_primitive(const KernelContext& ctx, const ConvGeometry& g, const float* x,
                    const Tensor& w, const float* bias, float* y);
// A function that applies an element-wise op to `n` float32 values in place, on up to
// `threads` threads (a fused Conv's epilogue: KernelContext::epilogue).
using InPlace = Epilogue;
// The op of `n` as such a function, computing bit for bit what its kernel computes on
// float32 carriers: the unary code its registration declares (exec::ElementwiseCode:
// Relu, LeakyRelu, HardSigmoid, HardSwish, Sigmoid, Tanh, Erf, Clip; `lo`, `hi`: Clip's
// min and max inputs from opset 11, float32 carriers, nullptr when absent); for Relu and
// HardSwish an ExactEpilogue, which vector kernels may apply in registers. An empty
// function for any other op.
InPlace in_place_unary(const model::Node& n, std::int64_t opset, const Tensor* lo,
                       const Tensor* hi);

// A DAG of element-wise nodes over one float32 tensor, applied in one pass over memory, a
// block of values at a time (an executor's fused chain after an Add: GELU as exporters
// write it, Div, Erf, Add, Mul, Mul). Each step is one node's per-element code, the code
// its kernel runs on float32 carriers, so the results are the unfused nodes' bit for bit.
class ElementwiseDag {
 public:
  // What a step reads: the DAG's input (0) or step k's result (k + 1), or a float32 scalar
  // (`value` -1).
  struct Operand {
    int value = 0;
    float scalar = 0;
  };
  // Whether `n` can be a step: an op registered with its element-wise code
  // (exec::ElementwiseCode): a unary one (its input 0 a value of the DAG, Clip's bounds
  // scalars), or Add, Sub, Mul, Div, Pow.
  static bool supports(const model::Node& n);
  // Appends `n` reading `in` (one per input of `n`; nullopt: an absent optional input);
  // false (nothing appended) where `n` cannot be a step on these operands.
  bool append(const model::Node& n, std::int64_t opset,
              const std::vector<std::optional<Operand>>& in);
  std::size_t size() const { return steps_.size(); }
  // Rounds each step's result to `f` with `o` (an emulated run's nodes, all in format `f`;
  // the rounding a function of the value alone, not stochastic).
  void round_to(const Format& f, const RoundOptions& o);
  // Replaces each of the `n` values with the last step's result, on up to `threads` threads.
  void operator()(float* values, std::size_t n, int threads) const;

 private:
  struct Step;
  void run(float* values, std::size_t n) const;  // on this thread, in blocks
  std::vector<std::shared_ptr<const Step>> steps_;
  std::optional<ArrayRounder> round_;  // each step's result, where set
};

void register_matmul(Registry& r);
void register_reduce(Registry& r);
void register_norm(Registry& r);
void register_shape(Registry& r);
void register_conv(Registry& r);
void register_index(Registry& r);
void register_resize(Registry& r);
void register_control(Registry& r);
void register_loss(Registry& r);
void register_quantize(Registry& r);
void register_qlinear(Registry& r);
void register_misc(Registry& r);
void register_rnn(Registry& r);
void register_sequence(Registry& r);
void register_spectral(Registry& r);

// out = x viewed with shape `view` (same element count), its axes permuted by `perm`
// (Transpose's attribute); out is allocated by the caller with x's dtype and size.
// Transpose, DepthToSpace and SpaceToDepth share it.
void permute_into(const Tensor& x, const Shape& view, const std::vector<std::int64_t>& perm,
                  Tensor& out, int threads);
std::string shape_str(const Shape& s);
// Copies `n` elements of `src` from element `from` to element `to` of `dst` (same dtype):
// their bytes, or the std::strings of a string tensor. The data-movement kernels that
// carry strings (Concat, Gather, SplitToSequence, ConcatFromSequence) copy through it.
inline void copy_elements(const Tensor& src, std::size_t from, Tensor& dst, std::size_t to,
                          std::size_t n) {
  if (n == 0) return;
  if (src.dtype() == DType::string) {
    const auto s = src.data<std::string>().subspan(from, n);
    std::copy(s.begin(), s.end(),
              dst.data<std::string>().begin() + static_cast<std::ptrdiff_t>(to));
    return;
  }
  const std::size_t isz = itemsize(src.dtype());
  std::memcpy(dst.bytes() + to * isz, src.bytes() + from * isz, n * isz);
}
// numpy broadcasting of two shapes; ctx.fail on mismatch.
Shape broadcast_shapes(const KernelContext& ctx, const Shape& a, const Shape& b);
// C-order strides of `in` seen through `out`'s shape (0 on broadcast dims).
std::vector<std::int64_t> broadcast_strides(const Shape& in, const Shape& out);
// An axis in [-rank, rank) -> [0, rank); ctx.fail otherwise.
std::int64_t norm_axis(const KernelContext& ctx, std::int64_t axis, std::int64_t rank);
// The values of an integer tensor (int32 or int64) as int64.
std::vector<std::int64_t> int_values(const KernelContext& ctx, const Tensor& t);
std::int64_t product(const Shape& s, std::size_t from = 0, std::size_t to = SIZE_MAX);

// Calls f(T{}) with the storage type of dtype d for the dtypes a kernel accepts:
// float (carrier for every floating dtype), int8..int64, uint8..uint64, bool (uint8).
template <class F>
void dispatch(const KernelContext& ctx, DType d, F&& f) {
  switch (d) {
    case DType::float32:
      return f(float{});
    case DType::float64:
      return f(double{});
    case DType::int8:
      return f(std::int8_t{});
    case DType::int16:
      return f(std::int16_t{});
    case DType::int32:
      return f(std::int32_t{});
    case DType::int64:
      return f(std::int64_t{});
    case DType::uint8:
      return f(std::uint8_t{});
    case DType::uint16:
      return f(std::uint16_t{});
    case DType::uint32:
      return f(std::uint32_t{});
    case DType::uint64:
      return f(std::uint64_t{});
    case DType::bool_:
      return f(std::uint8_t{});
    default:
      ctx.fail(std::string("unsupported dtype ") + std::string(to_string(d)));
  }
}

// The DType of a carrier type (float or double).
template <class T>
constexpr DType carrier_dtype() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  return std::is_same_v<T, double> ? DType::float64 : DType::float32;
}

// A kernel written once over its carrier type T, instantiated for both: runs the one of
// the executor's carrier (RunOptions::carrier). Registered as
// r.add("Softmax", carried<softmax<float>, softmax<double>>).
template <void (*F32)(KernelContext&), void (*F64)(KernelContext&)>
void carried(KernelContext& ctx) {
  if (ctx.carrier == DType::float64)
    F64(ctx);
  else
    F32(ctx);
}

// Calls f(T{}) with the executor's carrier type T (float or double).
template <class F>
decltype(auto) with_carrier(const KernelContext& ctx, F&& f) {
  if (ctx.carrier == DType::float64) return f(double{});
  return f(float{});
}

// Requires a floating carrier (every floating dtype arrives as the executor's carrier).
inline void require_float(const KernelContext& ctx, const Tensor& t, const char* what = "input") {
  if (t.dtype() != ctx.carrier)
    ctx.fail(std::string(what) + " has dtype " + std::string(to_string(t.dtype())) +
             ", which this op does not support (floating types only)");
}

}  // namespace fpguard::ops
