// The sum of two floats whose NaN does not depend on how the compiler orders the operands.
// Where both are NaN, x86 returns the first operand of the instruction, and a compiler
// may swap the operands of `a + b` (addition commutes for every other value), so the Add
// kernel and a fused Add could return different NaNs (payload, sign) for the same values.
// Here a NaN on the left is kept (quieted) and otherwise the sum is taken: the same bits
// whatever the order of the instruction's operands.
#pragma once

namespace fpguard::ops {

// One sum, of a selected operand (NaN + NaN is that NaN, quieted): a select and an add the
// compiler vectorises.
template <class T>
inline T left_nan_sum(T left, T right) {
  return left + (left != left ? left : right);
}

}  // namespace fpguard::ops
