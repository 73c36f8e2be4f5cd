#!/usr/bin/python3
"""Fits the polynomial coefficients of src/ops/vmath.cpp (erf and tanh).

Run with Debian's /usr/bin/python3 (NumPy); it prints the C++ constant blocks that
vmath.cpp holds, and the error of each fit with its coefficients rounded to float32.

Each fit is a weighted near-minimax fit in double: Lawson's algorithm (iteratively
reweighted least squares, which converges to the minimax solution) on a dense grid,
with the function values from Python's math module (double precision, far more
accurate than the float32 results need). The weights make the fitted error the one
that matters for the final float32 result:

  erf, |x| < kErfSplit:   erf(x) = x + x * P(x^2),  P(t) ~ erf(sqrt t)/sqrt t - 1.
      Weight: x / erf(x), so the fitted error is the relative error of erf.
  erf, kErfSplit <= |x| <= 4:  erf(x) = 1 - exp(-x^2) * R(x - kErfMid),
      R(x) ~ erfc(x) exp(x^2). Weight: exp(-x^2), so the fitted error is the absolute
      error of erfc, i.e. of erf (which is in [0.78, 1) there: an absolute error of
      2^-24 is one float32 ULP). Above 3.92, erf rounds to 1 in float32.
  tanh, |x| < kTanhSplit: tanh(x) = x + x * T(x^2), T(t) ~ tanh(sqrt t)/sqrt t - 1,
      T(0) = 0 (no constant term). Weight: x / tanh(x) (relative error of tanh).
      Above the split tanh(x) >= 0.5 and vmath uses 1 - 2 / (exp(2x) + 1).

The polynomials are evaluated in float32 Horner form; the leading term x is added last,
so the rounding errors of the polynomial part are scaled down by |P| <= 0.16.
"""
import math

import numpy as np

ERF_SPLIT = 0.875
ERF_HI = 4.0
ERF_MID = (ERF_SPLIT + ERF_HI) / 2
TANH_SPLIT = 0.5625


def lawson(v, f, w, powers, iters=300):
    """Coefficients c (for v**p, p in powers) minimising max |w (sum c v^p - f)|."""
    a = np.stack([v**p for p in powers], axis=1)
    lw = np.full(v.shape, 1.0 / v.size)
    for _ in range(iters):
        sw = np.sqrt(lw) * w
        c, *_ = np.linalg.lstsq(a * sw[:, None], f * sw, rcond=None)
        err = np.abs((a @ c - f) * w)
        lw = lw * err
        lw /= lw.sum()
    return c


def horner32(v, c):
    """Float32 Horner evaluation of sum c[k] v^k (c[0] the constant), as vmath does it."""
    v = v.astype(np.float32)
    acc = np.full(v.shape, np.float32(c[-1]), dtype=np.float32)
    for ck in c[-2::-1]:
        acc = (acc * v + np.float32(ck)).astype(np.float32)
    return acc


def show(name, coeffs):
    print(f"// {name}: highest power first")
    vals = ", ".join(f"{np.float32(c).item():.9e}f" for c in coeffs[::-1])
    print(f"constexpr float {name}[] = {{{vals}}};")


def main():
    erf = np.vectorize(math.erf)
    erfc = np.vectorize(math.erfc)
    tanh = np.vectorize(math.tanh)

    # erf, small |x|: P(t), t = x^2, degree 6 with a constant term.
    x = np.linspace(1e-6, ERF_SPLIT, 20000)
    t = x * x
    p = lawson(t, erf(x) / x - 1, x / erf(x), range(7))
    p32 = np.float32(p)
    got = x + x * horner32(t, p32).astype(np.float64)
    print(f"// erf small: max rel err with float32 coefficients "
          f"{np.max(np.abs(got / erf(x) - 1)):.3e} (2^-24 = {2.0**-24:.3e})")
    show("kErfSmall", p32)

    # erf, mid |x|: R(x - mid), degree 10.
    x = np.linspace(ERF_SPLIT, ERF_HI, 40000)
    r = lawson(x - ERF_MID, erfc(x) * np.exp(x * x), np.exp(-x * x), range(11))
    r32 = np.float32(r)
    got = np.exp(-x * x) * horner32(x - ERF_MID, r32).astype(np.float64)
    print(f"// erf mid: max abs err of erfc with float32 coefficients "
          f"{np.max(np.abs(got - erfc(x))):.3e}")
    show("kErfMid", r32)

    # tanh, small |x|: T(t) = t * (...), degree 6, no constant term.
    x = np.linspace(1e-6, TANH_SPLIT, 20000)
    t = x * x
    c = lawson(t, tanh(x) / x - 1, x / tanh(x), range(1, 7))
    c32 = np.float32(np.concatenate([[0.0], c]))
    got = x + x * horner32(t, c32).astype(np.float64)
    print(f"// tanh small: max rel err with float32 coefficients "
          f"{np.max(np.abs(got / tanh(x) - 1)):.3e}")
    show("kTanhSmall", c32[1:])


if __name__ == "__main__":
    main()
