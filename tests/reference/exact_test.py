#!/usr/bin/python3
"""`fpguard round` against an exact reference in rationals (fpgref.round_exact).

For every named format and a few custom ones, boundary inputs (signed zeros, infinities,
NaN, max and the overflow threshold, every halfway point near 1, near the smallest normal
and among the subnormals, points just above and below each of them, including the
float64 double-rounding traps such as 1 + 2^-11 + 2^-40 for float16, and negative
mirrors) go through the real binary as float64 and, where exactly representable, as
float32, for each rounding mode with and without --saturate and --flush-subnormals. The
values (and, with --encode, the codes) must equal the reference exactly; NaN matches
NaN and zeros are compared with their sign. Stochastic rounding must give one of the
two neighbours.

    exact_test.py --fpguard PATH
"""

import math
import os
import random
import sys
import tempfile
import time
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fpgref  # noqa: E402
from fpgref import DOWN, NEAREST, TOWARD_ZERO, UP, Val  # noqa: E402

import numpy as np  # noqa: E402

CUSTOM = ["e5m7", "e6m9", "e3m2fnuz", "e4m3fn", "e3m4", "e2m1", "e3m4fnuz", "e8m0fn",
          "e2m0fn", "e11m3", "e11m10"]
MODES = [NEAREST, TOWARD_ZERO, UP, DOWN]
OPTIONS = [(False, False), (True, False), (False, True), (True, True)]  # saturate, flush
F64_MAX = Fraction(np.finfo(np.float64).max.item())


def next_down(spec, v):
    """The format value just below the positive value v (as if unbounded below 0)."""
    q = spec.quantum(v)
    if v == 2 ** fpgref.floor_log2(v) and fpgref.floor_log2(v) > spec.emin:
        q /= 2
    return v - q


def anchors(spec):
    """Values of the format and the points halfway between neighbours, where rounding
    decides: near 1, near the smallest normal, among the subnormals, near max."""
    vals = set()

    def around(v, k):
        lo = hi = v
        vals.add(v)
        for _ in range(k):
            lo = next_down(spec, lo) if lo > 0 else lo
            hi = hi + spec.quantum(hi)
            vals.update((lo, hi))

    one = Fraction(1)
    if spec.min_positive <= one <= spec.max:
        around(one, 3)
    around(spec.smallest_normal, 3)
    around(spec.min_positive, 4)  # the subnormals, or E8M0's lowest binade
    around(spec.max, 2)  # two above max: the overflow region
    # a few values through the range
    rng = random.Random(spec.name)
    lo, hi = fpgref.floor_log2(spec.min_positive), spec.emax
    for _ in range(40):
        v = Fraction(2) ** rng.randint(lo, hi)
        vals.add(v + rng.randrange(1 << spec.m) * spec.quantum(v) if spec.m else v)
    vals = sorted(v for v in vals if v >= 0)
    points = set(vals)
    points.update((a + b) / 2 for a, b in zip(vals, vals[1:]))
    points.add(spec.min_positive / 2)
    points.add(spec.min_positive / 4)
    points.add(spec.min_positive * 3 / 4)
    return sorted(points)


def inputs(spec):
    """float64 inputs: anchors, points just above and below them, mirrors, specials."""
    out = set()
    for a in anchors(spec):
        if a == 0:
            continue
        lg = fpgref.floor_log2(a)
        cands = [a]
        for k in (20, 29, 40, 52):  # relative offsets, down to one float64 ulp
            d = Fraction(2) ** (lg - k)
            cands += [a - d, a + d]
        for c in cands:
            if 0 < c <= F64_MAX:
                f = float(c)  # nearest float64; the reference works on what is sent
                if f > 0:
                    out.add(f)
                    out.add(math.nextafter(f, math.inf))
                    out.add(math.nextafter(f, 0.0))
    # far outside the range, and the double-rounding trap written out for float16
    out.update((float(F64_MAX), 1e300, 5e-324, 2.0**-1000, 1 + 2.0**-11 + 2.0**-40,
                1 + 2.0**-11 - 2.0**-40, 1 + 2.0**-9 + 2.0**-40, 1 + 2.0**-9 - 2.0**-40))
    # random values of float64 across the format's range
    rng = random.Random("r" + spec.name)
    lo, hi = fpgref.floor_log2(spec.min_positive) - 2, min(spec.emax + 2, 1023)
    for _ in range(200):
        out.add(math.ldexp(1 + rng.random(), rng.randint(lo, hi)))
    out = {x for x in out if math.isfinite(x) and x > 0}
    xs = sorted(out)
    xs = xs + [-x for x in xs] + [0.0, -0.0, math.inf, -math.inf, math.nan]
    return np.array(xs, dtype=np.float64)


class Runner:
    def __init__(self, c, fpguard, tmp):
        self.c, self.fpguard, self.tmp = c, fpguard, tmp
        self.runs = 0

    def round(self, fmt, x, mode, saturate, flush, encode=False, seed=None):
        src = os.path.join(self.tmp, "in.npy")
        dst = os.path.join(self.tmp, "out.npy")
        if os.path.exists(dst):
            os.remove(dst)
        np.save(src, x)
        argv = ["round", fmt, src, "-o", dst, "--rounding", mode]
        argv += ["--saturate"] * saturate + ["--flush-subnormals"] * flush
        argv += ["--encode"] * encode + (["--seed", seed] if seed is not None else [])
        r = fpgref.run(self.fpguard, *argv)
        self.runs += 1
        if not self.c.check(r.returncode == 0, "fpguard " + " ".join(map(str, argv)),
                            f"exit {r.returncode}: {r.stderr}"):
            return None
        return np.load(dst)


def opts_name(fmt, mode, saturate, flush, dtype):
    return (f"{fmt} {mode}{' saturate' if saturate else ''}{' flush' if flush else ''} "
            f"({dtype})")


def expect_all(c, name, xs, got, expected, same, describe):
    """One check per element; messages are only built for failures (millions of cases)."""
    for xi, g, e in zip(xs, got, expected):
        if same(g, e):
            c.passed += 1
        else:
            c.check(False, f"{name}: x = {float(xi).hex()}", describe(g, e))


def describe_float(g, e):
    return f"got {g!r} ({float(g).hex()}), expected {e!r} ({float(e).hex()})"


def is_float32(v):
    """Whether the float64 v is a float32 value (NaN and infinities are)."""
    if not math.isfinite(v):
        return True
    with np.errstate(over="ignore"):
        return float(np.float32(v)) == v


def code_dtype(spec):
    return next(t for b, t in ((8, np.uint8), (16, np.uint16), (32, np.uint32), (64, np.uint64))
                if spec.bits <= b)


def check_format(c, runner, fmt, spec):
    x64 = inputs(spec)
    xv = [Val.from_float(v) for v in x64]
    # the float32 subset: inputs that are float32 values (NaN and infinities included)
    f32_mask = np.array([is_float32(v) for v in x64])
    x32 = x64[f32_mask].astype(np.float32)
    cases = 0
    for mode in MODES:
        for saturate, flush in OPTIONS:
            ref = [fpgref.round_exact(v, spec, mode, saturate, flush) for v in xv]
            ref64 = [r.to_float() for r in ref]
            name = opts_name(fmt, mode, saturate, flush, "float64")
            got = runner.round(fmt, x64, mode, saturate, flush)
            if got is not None:
                c.equal((got.dtype, got.shape), (np.dtype(np.float64), x64.shape), name + ": dtype")
                expect_all(c, name, x64, got.tolist(), ref64, fpgref.same_float, describe_float)
            # float32 input: the fast path where one exists
            name = opts_name(fmt, mode, saturate, flush, "float32")
            got = runner.round(fmt, x32, mode, saturate, flush)
            if got is not None:
                c.equal((got.dtype, got.shape), (np.dtype(np.float32), x32.shape), name + ": dtype")
                exp32 = [e for e, m in zip(ref64, f32_mask) if m]
                # where the format's value is not a float32 there is no carrier for it
                keep = [is_float32(e) for e in exp32]
                expect_all(c, name, x32[keep], got[keep].tolist(),
                           [e for e, k in zip(exp32, keep) if k], fpgref.same_float,
                           describe_float)
            # codes
            name = opts_name(fmt, mode, saturate, flush, "--encode")
            got = runner.round(fmt, x64, mode, saturate, flush, encode=True)
            if got is not None:
                c.equal((got.dtype, got.shape), (np.dtype(code_dtype(spec)), x64.shape),
                        name + ": dtype")
                codes = [spec.encode_value(r) for r in ref]
                expect_all(c, name, x64, got.tolist(), codes, int.__eq__,
                           lambda g, e: f"got code 0x{g:x}, expected 0x{e:x} ({spec.decode(e)})")
            cases += len(x64)

    # stochastic: one of the two neighbours (toward zero, or away from zero)
    for saturate in (False, True):
        tz = [fpgref.round_exact(v, spec, TOWARD_ZERO, saturate).to_float() for v in xv]
        away = [fpgref.round_exact(v, spec, DOWN if v.neg else UP, saturate).to_float()
                for v in xv]
        for seed in (1, 2):
            name = f"{fmt} stochastic seed {seed}{' saturate' if saturate else ''}"
            got = runner.round(fmt, x64, "stochastic", saturate, False, seed=seed)
            if got is None:
                continue
            expect_all(c, name, x64, got.tolist(), list(zip(tz, away)),
                       lambda g, e: fpgref.same_float(g, e[0]) or fpgref.same_float(g, e[1]),
                       lambda g, e: f"got {g!r}, expected {e[0]!r} or {e[1]!r}")
    return cases


def check_reference(c):
    """The reference itself on hand-computed cases, so a slip in it cannot pass unseen."""
    specs = {s.name: s for s in fpgref.named_specs()}
    f16, e4m3, e4m3z, fp4, e8m0 = (specs[n] for n in ("float16", "float8_e4m3fn",
                                                       "float8_e4m3fnuz", "float4_e2m1fn",
                                                       "float8_e8m0fnu"))

    def r(x, s, *a):
        return fpgref.round_exact(Val.from_float(x), s, *a).to_float()

    table = [
        (1 + 2.0**-11, f16, (), 1.0),  # tie, to even
        (1 + 3 * 2.0**-11, f16, (), 1 + 2 * 2.0**-10),  # tie, to even (up)
        (1 + 2.0**-11 + 2.0**-40, f16, (), 1 + 2.0**-10),
        (65520.0, f16, (), math.inf),  # max + half ulp ties away from odd max
        (65519.99, f16, (), 65504.0),
        (65520.0, f16, (NEAREST, True), 65504.0),
        (1e9, f16, (TOWARD_ZERO,), 65504.0),
        (-1e9, f16, (UP,), -65504.0),
        (-1e9, f16, (DOWN,), -math.inf),
        (2.0**-25, f16, (), 0.0),  # half the smallest subnormal: tie to zero
        (-(2.0**-25), f16, (), -0.0),
        (2.0**-25 + 2.0**-60, f16, (), 2.0**-24),
        (3 * 2.0**-25, f16, (), 2 * 2.0**-24),
        (2.0**-15, f16, (NEAREST, False, True), 0.0),  # flushed subnormal
        (1.0, f16, (UP,), 1.0),
        (1.0 + 2.0**-30, f16, (UP,), 1.0 + 2.0**-10),
        (464.0, e4m3, (), 448.0),  # tie between 448 (even) and the NaN code
        (464.0001, e4m3, (), math.nan),
        (464.0001, e4m3, (NEAREST, True), 448.0),
        (math.inf, e4m3, (), math.nan),
        (math.inf, e4m3, (NEAREST, True), 448.0),
        (248.0, e4m3z, (), math.nan),  # tie, 240's mantissa is odd
        (-(2.0**-12), e4m3z, (), 0.0),  # fnuz: no -0
        (1e6, fp4, (), 6.0),
        (-math.inf, fp4, (), -6.0),
        (5.0, fp4, (), 4.0),  # tie between 4 (even) and 6
        (0.25, fp4, (), 0.0),
        (0.75, fp4, (), 1.0),
        (1.5 * 2.0**10, e8m0, (), 2.0**11),  # tie: exponent codes 137 (odd) and 138
        (1.5 * 2.0**11, e8m0, (), 2.0**11),
        (2.0**-140, e8m0, (), 2.0**-127),  # no zero: the smallest value
        (0.0, e8m0, (), math.nan),
        (-1.0, e8m0, (), math.nan),
        (2.0**128, e8m0, (), math.nan),
        (2.0**128, e8m0, (NEAREST, True), 2.0**127),
    ]
    for x, s, a, e in table:
        c.check(fpgref.same_float(r(x, s, *a), e), f"reference: round({x!r}, {s.name}, {a})",
                f"got {r(x, s, *a)!r}, expected {e!r}")
    c.equal(f16.encode_value(Val.nan()), 0x7E00, "reference: float16 NaN code")
    c.equal(e4m3.encode_value(Val.fin(-448)), 0xFE, "reference: e4m3fn -max code")
    c.equal(e4m3z.encode_value(Val.nan()), 0x80, "reference: e4m3fnuz NaN code")
    c.equal(e8m0.encode_value(Val.fin(1)), 127, "reference: e8m0 code of 1")
    c.equal(fp4.encode_value(Val.fin(-6)), 0xF, "reference: fp4 code of -6")


def main():
    args = fpgref.parse_args(__doc__)
    c = fpgref.Checker("exact_test")
    check_reference(c)
    formats = [(s.name, s) for s in fpgref.named_specs()]
    formats += [(n, fpgref.custom_spec(n)) for n in CUSTOM]
    t0 = time.monotonic()
    total = 0
    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(c, args.fpguard, tmp)
        for fmt, spec in formats:
            def one(fmt=fmt, spec=spec):
                nonlocal total
                total += check_format(c, runner, fmt, spec)
            c.run_case(f"format {fmt}", one)
    print(f"{len(formats)} formats, {total} (input, mode, options) cases, {runner.runs} runs "
          f"of fpguard in {time.monotonic() - t0:.1f} s", flush=True)
    c.finish()


if __name__ == "__main__":
    main()
