"""Shared pieces of the reference and CLI tests: a tiny check harness, a runner for the
fpguard binary, and an independent model of floating-point formats in exact rationals.

The format model is written from the specifications (IEEE 754, OCP 8-bit Floating Point
(OFP8) rev. 1.0, OCP Microscaling Formats (MX) v1.0, and the AMD/Graphcore "fnuz" FP8
variants), not from fpguard's sources: a format is (exponent bits, mantissa bits, bias,
NaN encoding, subnormals?, signed?), a code is decoded field by field, and rounding is
done on fractions.Fraction, so nothing here rounds by accident.
"""

import argparse
import functools
import math
import os
import subprocess
import sys
import traceback
from fractions import Fraction

# ---- harness ------------------------------------------------------------------------


class Checker:
    """Counts named checks; a failed check prints its name and message and carries on."""

    def __init__(self, script):
        self.script = script
        self.passed = 0
        self.failed = 0
        self.max_failures_shown = 50

    def check(self, ok, case, message=""):
        if ok:
            self.passed += 1
            return True
        self.failed += 1
        if self.failed <= self.max_failures_shown:
            print(f"FAIL {case}: {message}", flush=True)
        elif self.failed == self.max_failures_shown + 1:
            print("... further failures not shown", flush=True)
        return False

    def equal(self, actual, expected, case):
        return self.check(actual == expected, case, f"got {actual!r}, expected {expected!r}")

    def run_case(self, case, fn, *args, **kwargs):
        """Runs fn; an exception is one failure named `case`, not the end of the script."""
        try:
            fn(*args, **kwargs)
        except Exception:  # noqa: BLE001 - report and continue
            self.check(False, case, "raised\n" + traceback.format_exc())

    def finish(self):
        print(f"{self.script}: {self.passed} passed, {self.failed} failed", flush=True)
        sys.exit(1 if self.failed else 0)


def parse_args(description, extra=None):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--fpguard", required=True, help="path of the fpguard binary")
    if extra:
        extra(p)
    args = p.parse_args()
    if not os.access(args.fpguard, os.X_OK):
        p.error(f"--fpguard {args.fpguard!r} is not an executable file")
    return args


def run(binary, *argv, check=False, cwd=None):
    """Runs `binary argv...`; returns CompletedProcess with text stdout/stderr."""
    r = subprocess.run([binary, *map(str, argv)], capture_output=True, text=True, cwd=cwd,
                       timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))}: exit {r.returncode}\n{r.stderr}")
    return r


def run_model(binary, tmp, model, x):
    """Saves `model` (an onnx.ModelProto with one input "x" and one output "y") and `x` in
    the directory `tmp` and runs `fpguard run` on them. Returns (y as read back, or None
    when fpguard failed; the CompletedProcess)."""
    import numpy as np
    import onnx

    path = os.path.join(tmp, "m.onnx")
    onnx.save(model, path)
    xp = os.path.join(tmp, "x.npy")
    np.save(xp, x)
    out = os.path.join(tmp, "out")
    r = run(binary, "run", path, "--input", "x=" + xp, "--outputs", out)
    if r.returncode != 0:
        return None, r
    return np.load(os.path.join(out, "y.npy")), r


# ---- values -------------------------------------------------------------------------


class Val:
    """A floating-point datum: NaN, +-inf, or a signed finite rational (with signed zero)."""

    __slots__ = ("kind", "neg", "mag")

    def __init__(self, kind, neg=False, mag=Fraction(0)):
        self.kind, self.neg = kind, neg
        self.mag = mag if type(mag) is Fraction else Fraction(mag)

    def key(self):
        return (self.kind, self.neg, self.mag)

    @staticmethod
    def nan():
        return Val("nan")

    @staticmethod
    def inf(neg=False):
        return Val("inf", neg)

    @staticmethod
    def fin(x, neg=None):
        x = Fraction(x)
        return Val("fin", x < 0 if neg is None else neg, abs(x))

    @staticmethod
    def from_float(x):
        x = float(x)
        if math.isnan(x):
            return Val.nan()
        neg = math.copysign(1.0, x) < 0
        if math.isinf(x):
            return Val.inf(neg)
        return Val("fin", neg, abs(Fraction(x)))

    def to_float(self):
        """The float64 of this value; raises when it is not exactly a float64."""
        if self.kind == "nan":
            return math.nan
        s = -1.0 if self.neg else 1.0
        if self.kind == "inf":
            return s * math.inf
        f = float(self.mag)
        if Fraction(f) != self.mag:
            raise ValueError(f"{self.mag} is not a float64")
        return math.copysign(f, s)

    def __repr__(self):
        if self.kind == "nan":
            return "nan"
        if self.kind == "inf":
            return "-inf" if self.neg else "inf"
        return ("-" if self.neg else "") + repr(float(self.mag))


def same_float(a, b):
    """Equality of two floats where NaN equals NaN and zeros are compared by sign."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def floor_log2(q):
    """floor(log2(q)) for a positive Fraction, exactly."""
    n, d = q.numerator, q.denominator
    k = n.bit_length() - d.bit_length()
    # 2^k <= q < 2^(k+1) after at most one correction
    if k >= 0:
        if n < d << k:
            k -= 1
    else:
        if n << -k < d:
            k -= 1
    return k


@functools.lru_cache(maxsize=None)
def pow2(k):
    return Fraction(1 << k) if k >= 0 else Fraction(1, 1 << -k)


# ---- formats ------------------------------------------------------------------------

IEEE, FN, FNUZ, NONE = "ieee", "fn", "fnuz", "none"


class Spec:
    """A format as the specifications describe it, with codes decoded field by field."""

    def __init__(self, name, e, m, bias, nan, subnormals=True, signed=True):
        self.name, self.e, self.m, self.bias, self.nan = name, e, m, bias, nan
        self.subnormals, self.signed = subnormals, signed
        self.bits = (1 if signed else 0) + e + m
        self.emin = (1 - bias) if subnormals else -bias  # exponent of the smallest normal
        self._codes = {}  # encode_value's memo
        # The largest value: the first finite code scanning down from the top. Special
        # codes use all of an exponent (IEEE) or its top mantissa (fn), so trying the two
        # largest mantissas of each exponent code is enough.
        self.max_code = next(
            code
            for ex in range((1 << e) - 1, -1, -1)
            for mant in ((1 << m) - 1, (1 << m) - 2)
            if mant >= 0
            for code in [(ex << m) | mant]
            if self.decode(code).kind == "fin")
        code = self.max_code
        self.max = self.decode(code).mag
        self.emax = floor_log2(self.max)
        self.smallest_normal = pow2(self.emin)
        positive = [self.decode(c) for c in (0, 1)]
        self.min_positive = min(v.mag for v in positive if v.kind == "fin" and v.mag > 0)

    def __repr__(self):
        return self.name

    @property
    def has_inf(self):
        return self.nan == IEEE

    @property
    def has_negative_zero(self):
        return self.signed and self.nan != FNUZ

    def decode(self, code):
        e, m = self.e, self.m
        neg = self.signed and bool((code >> (e + m)) & 1)
        ex = (code >> m) & ((1 << e) - 1)
        mant = code & ((1 << m) - 1)
        top = (1 << e) - 1
        if self.nan == IEEE and ex == top:
            return Val.inf(neg) if mant == 0 else Val.nan()
        if self.nan == FN and ex == top and mant == (1 << m) - 1:
            return Val.nan()
        if self.nan == FNUZ and neg and ex == 0 and mant == 0:
            return Val.nan()
        if ex == 0 and self.subnormals:
            mag = mant * pow2(1 - self.bias - m)
        else:
            mag = ((1 << m) + mant) * pow2(ex - self.bias - m)
        return Val("fin", neg, mag)

    def quantum(self, a):
        """The spacing of the format's values in the binade of the positive rational a
        (as if the exponent range were unbounded above)."""
        return pow2(max(floor_log2(a), self.emin) - self.m)

    def encode_value(self, v):
        """The code of a value of the format (as round() returns them). NaN is the
        canonical NaN code; formats without NaN use +max's code (fpguard's convention)."""
        key = v.key()
        code = self._codes.get(key)
        if code is None:
            code = self._codes[key] = self._encode(v)
        return code

    def _encode(self, v):
        e, m = self.e, self.m
        if v.kind == "nan":
            if self.nan == IEEE:
                return (((1 << e) - 1) << m) | (1 << (m - 1))
            if self.nan == FN:
                return (1 << (e + m)) - 1
            if self.nan == FNUZ:
                return 1 << (e + m)
            return self.max_code
        sign = (1 << (e + m)) if (self.signed and v.neg) else 0
        if v.kind == "inf":
            assert self.has_inf, v
            return sign | (((1 << e) - 1) << m)
        a = v.mag
        if a == 0:
            return sign if self.has_negative_zero else 0
        lg = floor_log2(a)
        if lg < self.emin:
            assert self.subnormals
            ex, t = 0, a / pow2(self.emin - m)
        else:
            ex, t = lg + self.bias, a / pow2(lg - m) - (1 << m)
        assert t.denominator == 1 and 0 <= t < (1 << m), (self, v)
        code = sign | (ex << m) | int(t)
        back = self.decode(code)
        assert back.kind == "fin" and back.mag == a, (self, v, code)
        return code


def named_specs():
    """The named formats, written from the specification tables."""
    return [
        Spec("float64", 11, 52, 1023, IEEE),
        Spec("float32", 8, 23, 127, IEEE),
        Spec("tf32", 8, 10, 127, IEEE),
        Spec("float16", 5, 10, 15, IEEE),
        Spec("bfloat16", 8, 7, 127, IEEE),
        Spec("float8_e4m3fn", 4, 3, 7, FN),  # OFP8 E4M3
        Spec("float8_e4m3fnuz", 4, 3, 8, FNUZ),
        Spec("float8_e5m2", 5, 2, 15, IEEE),  # OFP8 E5M2
        Spec("float8_e5m2fnuz", 5, 2, 16, FNUZ),
        Spec("float6_e2m3fn", 2, 3, 1, NONE),  # MX FP6 E2M3
        Spec("float6_e3m2fn", 3, 2, 3, NONE),  # MX FP6 E3M2
        Spec("float4_e2m1fn", 2, 1, 1, NONE),  # MX FP4 E2M1
        Spec("float8_e8m0fnu", 8, 0, 127, FN, subnormals=False, signed=False),  # MX E8M0 scale
    ]


def custom_spec(name):
    """eXmY[fn|fnuz]: IEEE-style bias 2^(X-1)-1, one more for fnuz."""
    import re

    mt = re.fullmatch(r"e(\d+)m(\d+)(fn|fnuz)?", name)
    e, m, suffix = int(mt.group(1)), int(mt.group(2)), mt.group(3) or IEEE
    bias = (1 << (e - 1)) - 1 + (1 if suffix == FNUZ else 0)
    return Spec(name, e, m, bias, suffix)


# ---- exact rounding -----------------------------------------------------------------

NEAREST, TOWARD_ZERO, UP, DOWN = "nearest-even", "toward-zero", "up", "down"


def round_exact(x, spec, mode=NEAREST, saturate=False, flush=False):
    """Rounds the Val x into spec, exactly, with fpguard's documented semantics:
    - NaN -> NaN; for an unsigned format (E8M0) anything <= 0 (and -0, -inf) -> NaN;
    - +-inf stays inf where the format has inf, else +-max when saturating (always for
      formats without NaN, OCP MX FP6/FP4) and NaN otherwise;
    - finite values round in an unbounded exponent range, then a result beyond max
      overflows: toward-zero gives max; up/down give max on the side they move away from
      infinity and the overflow value on the other; nearest gives the overflow value,
      which is max when saturating or for FP6/FP4, inf for IEEE formats, NaN for fn/fnuz;
    - ties go to the even code (the code's last bit, which is the exponent for E8M0);
    - an unsigned format has no zero: results below its smallest value become it;
    - flush: results below the smallest normal become zero (formats with subnormals);
    - fnuz formats have no -0: a zero result is +0.
    """
    if x.kind == "nan":
        return Val.nan()
    if not spec.signed and (x.neg or (x.kind == "fin" and x.mag == 0)):
        return Val.nan()
    neg = x.neg

    def signed(v):
        if v.kind == "nan":
            return v
        if v.kind == "fin" and v.mag == 0 and not spec.has_negative_zero:
            return Val("fin", False, 0)
        return Val(v.kind, neg, v.mag)

    saturating = saturate or spec.nan == NONE
    max_v = Val("fin", False, spec.max)
    if spec.has_inf:
        overflow = max_v if saturate else Val.inf()
    else:
        overflow = max_v if saturating else Val.nan()
    if x.kind == "inf":
        return signed(Val.inf() if spec.has_inf else (max_v if saturating else Val.nan()))
    a = x.mag
    if a == 0:
        return signed(Val("fin", False, 0))

    q = spec.quantum(a)
    t = a / q
    n = t.numerator // t.denominator
    rem = t - n
    lower = n * q
    if mode == NEAREST:
        if rem > Fraction(1, 2):
            n += 1
        elif rem == Fraction(1, 2):
            if lower > spec.max:
                n += 1  # overflows either way
            elif lower == 0:
                pass  # zero is even
            elif not spec.signed and lower < spec.min_positive:
                n += 1
            else:
                n += spec.encode_value(Val("fin", False, lower)) & 1
    elif mode == TOWARD_ZERO:
        pass
    elif mode == UP:
        n += 1 if (rem > 0 and not neg) else 0
    elif mode == DOWN:
        n += 1 if (rem > 0 and neg) else 0
    else:
        raise ValueError(mode)
    v = n * q
    if not spec.signed and v < spec.min_positive:
        v = spec.min_positive
    if v > spec.max:
        away = (mode == UP and not neg) or (mode == DOWN and neg)
        if mode == TOWARD_ZERO or (mode in (UP, DOWN) and not away):
            return signed(max_v)
        return signed(overflow)
    if flush and spec.subnormals and v < spec.smallest_normal:
        v = 0
    return signed(Val("fin", False, v))
