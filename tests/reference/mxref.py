"""Scaled formats in NumPy, written from their definitions, not from fpguard's sources:
OCP Microscaling Formats (MX) Specification v1.0 (sec. 5: element formats, E8M0 scale,
block of 32; sec. 6.3: shared_exp = floor(log2(amax)) - emax_elem), NVIDIA's NVFP4 (E2M1
elements in blocks of 16, an E4M3 block scale under a float32 tensor scale) and scaled FP8
as ModelOpt's FP8 PTQ deploys it (scale = amax / 448, per tensor or per output channel).

Element formats are (exponent bits, mantissa bits, bias, max, NaN?) straight from the specs'
tables; rounding is round-half-even on the quantum of each value's binade (np.rint is
half-even), then saturation at max. All arrays are vectorized: this is also the speed
baseline of bench/ (the issue asks the C++ path to be >= 20x faster).
"""

import numpy as np

# name: (exponent bits, mantissa bits, bias, max, emax, has a NaN code)
ELEMENTS = {
    "float8_e4m3fn": (4, 3, 7, 448.0, 8, True),
    "float8_e5m2": (5, 2, 15, 57344.0, 15, True),
    "float6_e3m2fn": (3, 2, 3, 28.0, 4, False),
    "float6_e2m3fn": (2, 3, 1, 7.5, 2, False),
    "float4_e2m1fn": (2, 1, 1, 6.0, 2, False),
    "int8": (None, 6, None, 127 / 64, 0, False),  # MXINT8: k * 2^-6, |k| <= 127
}

# name: (element, scale, block size, kind)
SCALED = {
    "mxfp8_e4m3": ("float8_e4m3fn", "e8m0", 32, "mx"),
    "mxfp8_e5m2": ("float8_e5m2", "e8m0", 32, "mx"),
    "mxfp6_e3m2": ("float6_e3m2fn", "e8m0", 32, "mx"),
    "mxfp6_e2m3": ("float6_e2m3fn", "e8m0", 32, "mx"),
    "mxfp4_e2m1": ("float4_e2m1fn", "e8m0", 32, "mx"),
    "mxint8": ("int8", "e8m0", 32, "mx"),
    "nvfp4": ("float4_e2m1fn", "float8_e4m3fn", 16, "nvfp4"),
    "tensor:float8_e4m3fn": ("float8_e4m3fn", "float32", None, "tensor"),
    "tensor:float8_e5m2": ("float8_e5m2", "float32", None, "tensor"),
    "channel:float8_e4m3fn": ("float8_e4m3fn", "float32", None, "channel"),
    "channel:float8_e5m2": ("float8_e5m2", "float32", None, "channel"),
}


def emin(name):
    """Exponent of the smallest normal (the subnormal binade shares its quantum)."""
    e, m, bias, _, _, _ = ELEMENTS[name]
    return 0 if e is None else 1 - bias


def round_element(q, name):
    """q (float64) rounded half-even into the element format, saturating at +-max."""
    _, m, _, vmax, _, _ = ELEMENTS[name]
    q = np.asarray(q, dtype=np.float64)
    a = np.abs(q)
    with np.errstate(divide="ignore"):
        _, ex = np.frexp(a)  # a = f * 2^ex, f in [0.5, 1): floor(log2 a) = ex - 1
    binade = np.maximum(ex - 1, emin(name))
    quantum = np.ldexp(1.0, binade - m)
    r = np.rint(a / quantum) * quantum
    r = np.minimum(r, vmax)
    return np.copysign(r, q)


def element_codes(p, name):
    """Codes of element values p (already values of the format)."""
    e, m, bias, _, _, _ = ELEMENTS[name]
    if e is None:  # MXINT8: two's complement of k = p * 64
        return np.ldexp(p, 6).astype(np.int64).astype(np.int8)
    a = np.abs(p)
    _, ex = np.frexp(a)
    normal = a >= np.ldexp(1.0, 1 - bias)
    exp_field = np.where(normal, ex - 1 + bias, 0)
    frac = np.where(normal, a / np.ldexp(1.0, ex - 1) - 1, a / np.ldexp(1.0, 1 - bias))
    mant = np.rint(frac * 2**m).astype(np.int64)
    sign = np.signbit(p).astype(np.int64)
    return ((sign << (e + m)) | (exp_field.astype(np.int64) << m) | mant).astype(np.uint8)


def e4m3_code(v):
    """E4M3 code of non-negative E4M3 values v (NaN -> 0x7F)."""
    nan = np.isnan(v)
    c = element_codes(np.where(nan, 0.0, v), "float8_e4m3fn")
    return np.where(nan, np.uint8(0x7F), c).astype(np.uint8)


def blocks_view(x, axis, size):
    """x with `axis` last, padded with zeros to whole blocks: [..., nblocks, size]."""
    y = np.moveaxis(x, axis, -1)
    n = y.shape[-1]
    nb = -(-n // size)
    pad = np.zeros(y.shape[:-1] + (nb * size - n,), dtype=x.dtype)
    return np.concatenate([y, pad], axis=-1).reshape(y.shape[:-1] + (nb, size)), n


def unblock(b, n, axis):
    y = b.reshape(b.shape[:-2] + (-1,))[..., :n]
    return np.moveaxis(y, -1, axis)


def finite_amax(b, axis=-1, keepdims=True):
    return np.max(np.where(np.isfinite(b), np.abs(b), 0), axis=axis, keepdims=keepdims)


def quantize_mx(x, fmt, axis=-1):
    """OCP MX: returns (values, element codes, scale codes) for float32/float64 x."""
    elem, _, size, _ = SCALED[fmt]
    emax = ELEMENTS[elem][4]
    b, n = blocks_view(x, axis, size)
    bad = np.any(~np.isfinite(b), axis=-1, keepdims=True)
    amax = finite_amax(b).astype(np.float64)
    with np.errstate(divide="ignore"):
        _, ex = np.frexp(amax)
    shared = np.where(amax == 0, -127, np.clip(ex - 1 - emax, -127, 127))
    with np.errstate(invalid="ignore"):  # the NaN blocks' lanes, discarded
        p = round_element(np.ldexp(b.astype(np.float64), -shared), elem)
        vals = np.where(bad, np.nan, np.ldexp(p, shared)).astype(x.dtype)
        codes = np.where(bad, 0, element_codes(p, elem))
    scale_codes = np.where(bad[..., 0], 255, shared[..., 0] + 127).astype(np.uint8)
    code_t = np.int8 if elem == "int8" else np.uint8
    return (unblock(vals, n, axis), unblock(codes.astype(code_t), n, axis),
            np.moveaxis(scale_codes, -1, axis))


def quantize_nvfp4(x, axis=-1):
    """NVFP4 in the carrier's precision (float32 for float32 x): (values, codes, scale codes,
    global scale)."""
    t = x.dtype.type
    b, n = blocks_view(x, axis, 16)
    bad = np.any(~np.isfinite(b), axis=-1, keepdims=True)
    s_t = t(finite_amax(x, axis=None, keepdims=False)) / t(6 * 448)
    if s_t == 0:
        zeros = np.zeros(b.shape, dtype=np.uint8)
        vals = np.where(bad, np.nan, np.zeros(b.shape)).astype(x.dtype)
        sc = np.where(bad[..., 0], 0x7F, 0).astype(np.uint8)
        return (unblock(vals, n, axis), unblock(zeros, n, axis), np.moveaxis(sc, -1, axis),
                np.float32(s_t))
    raw = (finite_amax(b) / (t(6) * s_t)).astype(x.dtype)
    s_b = round_element(raw, "float8_e4m3fn").astype(x.dtype)
    d = (s_b * s_t).astype(x.dtype)
    zero = (s_b == 0) | (d == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(zero, 0, b / np.where(zero, 1, d)).astype(x.dtype)
    with np.errstate(invalid="ignore", over="ignore"):  # the NaN blocks' lanes, discarded
        p = round_element(q.astype(np.float64), "float4_e2m1fn")
        vals = ((p.astype(x.dtype) * np.where(zero, 0, s_b)) * s_t).astype(x.dtype)
        vals = np.where(bad, np.nan, vals).astype(x.dtype)
        codes = np.where(bad, 0, element_codes(p, "float4_e2m1fn")).astype(np.uint8)
    sc = e4m3_code(np.where(bad, np.nan, np.where(zero, 0, s_b)).astype(np.float64))[..., 0]
    return unblock(vals, n, axis), unblock(codes, n, axis), np.moveaxis(sc, -1, axis), np.float32(s_t)


def quantize_amax(x, fmt, axis=0):
    """Scaled FP8 (tensor: or channel: along `axis`): (values, codes, scales)."""
    elem, _, _, kind = SCALED[fmt]
    t = x.dtype.type
    vmax = t(ELEMENTS[elem][3])
    if kind == "tensor":
        amax = finite_amax(x, axis=None, keepdims=False)
        amax = np.asarray(amax, dtype=x.dtype).reshape((1,) * x.ndim)
    else:
        others = tuple(i for i in range(x.ndim) if i != axis % x.ndim)
        amax = finite_amax(x, axis=others, keepdims=True).astype(x.dtype)
    scale = np.where(amax == 0, t(1), amax / vmax).astype(x.dtype)
    with np.errstate(invalid="ignore"):
        q = (x / scale).astype(x.dtype)
    finite = np.isfinite(q)
    p = round_element(np.where(finite, q, 0).astype(np.float64), elem)
    p = np.where(finite, p, np.nan)
    vals = (p.astype(x.dtype) * scale).astype(x.dtype)
    nan_code = 0x7F
    codes = np.where(finite, element_codes(np.where(finite, p, 0), elem), nan_code).astype(np.uint8)
    scales = scale.reshape(()) if kind == "tensor" else scale.reshape(-1)
    return vals, codes, scales
