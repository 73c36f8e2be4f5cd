#include <cstdlib>
#include <new>

#include "ops/ops.hpp"

namespace fpguard::ops {

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(s[i]);
  }
  return out + "]";
}

Shape broadcast_shapes(const KernelContext& ctx, const Shape& a, const Shape& b) {
  const std::size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (std::size_t i = 0; i < r; ++i) {
    const std::int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const std::int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      ctx.fail("shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<std::int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<std::int64_t> st(out.size(), 0);
  std::int64_t s = 1;
  for (std::size_t k = 0; k < in.size(); ++k) {
    const std::size_t i = in.size() - 1 - k, o = out.size() - 1 - k;
    st[o] = in[i] == 1 ? 0 : s;
    s *= in[i];
  }
  return st;
}

std::int64_t norm_axis(const KernelContext& ctx, std::int64_t axis, std::int64_t rank) {
  if (axis < -rank || axis >= std::max<std::int64_t>(rank, 1))
    ctx.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<std::int64_t> int_values(const KernelContext& ctx, const Tensor& t) {
  if (t.dtype() == DType::int64) {
    auto d = t.data<std::int64_t>();
    return {d.begin(), d.end()};
  }
  if (t.dtype() == DType::int32) {
    auto d = t.data<std::int32_t>();
    return {d.begin(), d.end()};
  }
  ctx.fail("expected an int64 or int32 tensor, got " + std::string(to_string(t.dtype())));
}

std::int64_t product(const Shape& s, std::size_t from, std::size_t to) {
  std::int64_t p = 1;
  for (std::size_t i = from; i < std::min(to, s.size()); ++i) p *= s[i];
  return p;
}

void* thread_scratch(Scratch use, std::size_t bytes) {
  struct Buffer {
    void* data = nullptr;
    std::size_t size = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buffers[static_cast<int>(Scratch::count)];
  Buffer& b = buffers[static_cast<int>(use)];
  if (b.size < bytes) {
    std::free(b.data);
    b.size = 0;
    b.data = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!b.data) throw std::bad_alloc();
    b.size = bytes;
  }
  return b.data;
}

}  // namespace fpguard::ops
