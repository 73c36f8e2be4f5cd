#!/usr/bin/python3
"""`fpguard inspect --formats <scaled formats> --json` against NumPy: each scaled format's
block findings (flushed values, underflowed and saturated blocks, NaN blocks, rounding
errors, block dynamic range, verdict) recomputed here from mxref.py's quantizers and the
definitions in docs/inspect.md, field by field.

    mx_inspect_test.py --fpguard PATH
"""

import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mxref  # noqa: E402

import numpy as np  # noqa: E402

VERDICT_FRACTION = 0.01


def element_of(fmt):
    if fmt == "nvfp4":
        return "float4_e2m1fn"
    if fmt.startswith(("tensor:", "channel:")):
        return fmt.split(":", 1)[1]
    return mxref.SCALED[fmt][0]


def element_range_bits(elem):
    """log2(max / smallest positive value) of the element format, from the spec's table."""
    e, m, bias, vmax, _, _ = mxref.ELEMENTS[elem]
    smallest = 2.0**-6 if e is None else 2.0 ** (1 - bias - m)
    return math.log2(vmax / smallest)


def precision_bits(elem):
    return mxref.ELEMENTS[elem][1] + 1


def saturation_limit(elem):
    """|x / scale| past which round-half-even would go beyond max (saturated), and whether
    the tie itself goes up: max + half its quantum; the tie rounds up when max's last
    significand bit is odd."""
    e, m, bias, vmax, emax, _ = mxref.ELEMENTS[elem]
    quantum = 2.0**-6 if e is None else 2.0 ** (emax - m)
    odd = int(round(vmax / quantum)) % 2 == 1
    return vmax + quantum / 2, odd


def quantize(x, fmt, axis):
    """The reference quantizer's values."""
    if fmt == "nvfp4":
        return mxref.quantize_nvfp4(x, axis)[0]
    if fmt.startswith(("tensor:", "channel:")):
        return mxref.quantize_amax(x, fmt, axis % x.ndim)[0]
    return mxref.quantize_mx(x, fmt, axis)[0]


def groups(a, fmt, axis):
    """The array cut into its scale groups: [groups, members] (zero-padded short blocks with
    a mask of the real members)."""
    if fmt.startswith("tensor:"):
        return a.reshape(1, -1), np.ones((1, a.size), bool)
    if fmt.startswith("channel:"):
        y = np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1)
        return y, np.ones(y.shape, bool)
    size = 16 if fmt == "nvfp4" else mxref.SCALED[fmt][2]
    b, _ = mxref.blocks_view(a, axis, size)
    m, _ = mxref.blocks_view(np.ones(a.shape, bool), axis, size)
    return b.reshape(-1, size), m.reshape(-1, size)


def saturated_values(x, y, fmt, axis):
    """Finite values whose |x / scale| passed the saturation limit. The scale of a group is
    recovered from the reference: for MX 2^shared_exp, for the others amax-derived."""
    elem = element_of(fmt)
    limit, tie_up = saturation_limit(elem)
    if fmt == "nvfp4":
        _, _, sc, s_t = mxref.quantize_nvfp4(x, axis)
        s_b = decode_e4m3(np.moveaxis(sc, axis, -1)).astype(x.dtype)
        d = (s_b * x.dtype.type(s_t)).astype(x.dtype)
        xb, _ = mxref.blocks_view(x, axis, 16)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(d[..., None] == 0, 0, xb / np.where(d == 0, 1, d)[..., None])
        return q, limit, tie_up
    if fmt.startswith(("tensor:", "channel:")):
        kind = fmt.split(":", 1)[0]
        vmax = x.dtype.type(mxref.ELEMENTS[elem][3])
        if kind == "tensor":
            amax = mxref.finite_amax(x, axis=None, keepdims=False)
            scale = x.dtype.type(1) if amax == 0 else x.dtype.type(amax) / vmax
            q = x / scale
        else:
            others = tuple(i for i in range(x.ndim) if i != axis % x.ndim)
            amax = mxref.finite_amax(x, axis=others, keepdims=True).astype(x.dtype)
            scale = np.where(amax == 0, x.dtype.type(1), amax / vmax).astype(x.dtype)
            q = (x / scale).astype(x.dtype)
        return q, limit, tie_up
    _, _, sc = mxref.quantize_mx(x, fmt, axis)
    shared = np.moveaxis(sc, axis, -1).astype(np.int64) - 127
    xb, _ = mxref.blocks_view(x, axis, mxref.SCALED[fmt][2])
    with np.errstate(invalid="ignore"):
        q = np.ldexp(xb.astype(np.float64), -shared[..., None])
    return q, limit, tie_up


def decode_e4m3(codes):
    c = codes.astype(np.int64)
    e = (c >> 3) & 0xF
    m = c & 7
    v = np.where(e == 0, m * 2.0**-9, (1 + m / 8.0) * 2.0 ** (e - 7))
    v = np.where((e == 15) & (m == 7), np.nan, v)
    return np.where(c >> 7, -v, v)


def expected(x, fmt, axis):
    y = quantize(x, fmt, axis)
    xg, mask = groups(x, fmt, axis)
    yg, _ = groups(y, fmt, axis)
    elem = element_of(fmt)
    out = {"axis": axis}
    bad = np.any(~np.isfinite(xg) & mask, axis=1)
    out["blocks"] = len(xg)
    out["nan_blocks"] = int(np.sum(bad & ~fmt.startswith(("tensor:", "channel:"))))
    # saturated: |x / scale| past the limit (ties by the max's parity), finite x only
    q, limit, tie_up = saturated_values(x, y, fmt, axis)
    if fmt.startswith(("tensor:", "channel:")):
        qg, _ = groups(np.asarray(q), fmt, axis)
    else:
        qg = q.reshape(-1, q.shape[-1])
    aq = np.abs(np.where(np.isfinite(xg) & mask, qg, 0))
    sat = (aq > limit) | ((aq == limit) & tie_up)
    sat &= ~bad[:, None] | fmt.startswith(("tensor:", "channel:"))
    out["saturated"] = int(np.sum(sat))
    out["saturated_blocks"] = int(np.sum(np.any(sat, axis=1)))
    finite = np.isfinite(xg) & mask & ~np.isnan(yg)
    nonzero = finite & (xg != 0)
    zeroed = nonzero & (yg == 0)
    kept = np.any(nonzero & (yg != 0), axis=1)
    nz = np.sum(zeroed, axis=1)
    out["nonzero"] = int(np.sum(nonzero))
    out["flushed"] = int(np.sum(nz[kept]))
    out["flushed_blocks"] = int(np.sum((nz > 0) & kept))
    # swamped: flushed in blocks that lost at least half of their non-zero values
    swamped = kept & (nz > 0) & (2 * nz >= np.sum(nonzero, axis=1))
    out["swamped"] = int(np.sum(nz[swamped]))
    out["swamped_blocks"] = int(np.sum(swamped))
    out["underflow"] = int(np.sum(nz[~kept]))
    xd, yd = xg.astype(np.float64), yg.astype(np.float64)
    # clipped: beyond the block's largest decoded magnitude by more than the precision loss
    top = np.max(np.where(np.isfinite(yd) & mask, np.abs(yd), 0), axis=1, keepdims=True)
    loss = 2.0 ** (-0.5 * precision_bits(elem))
    with np.errstate(invalid="ignore"):
        clip = nonzero & (top > 0) & (np.abs(xd) > top) & (np.abs(xd) - top > loss * np.abs(xd))
    out["clipped"] = int(np.sum(clip))
    out["clipped_blocks"] = int(np.sum(np.any(clip, axis=1)))
    # subnormal (amax-rule formats): non-zero results whose element code is an E4M3 subnormal
    out["subnormal"] = 0
    if fmt.startswith(("tensor:", "channel:")):
        assert elem == "float8_e4m3fn"
        codes = mxref.quantize_amax(x, fmt, axis % x.ndim)[1]
        eg, _ = groups(np.abs(decode_e4m3(codes)), fmt, axis)
        out["subnormal"] = int(np.sum(nonzero & (yg != 0) & (eg > 0) & (eg < 2.0**-6)))
    err = np.where(finite, np.abs(yd - xd), 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(nonzero, err / np.abs(xd), 0)
    out["precision_loss"] = int(np.sum(nonzero & (rel > loss)))
    out["max_abs_error"] = float(np.max(err)) if err.size else 0.0
    out["max_rel_error"] = float(np.max(rel)) if rel.size else 0.0
    n = int(np.sum(nonzero))
    out["mean_rel_error"] = float(np.sum(rel[nonzero]) / n) if n else 0.0
    hist = {}
    widest = 0.0
    for row, nzr in zip(np.abs(xd), nonzero):
        if not np.any(nzr):
            continue
        bits = math.log2(row[nzr].max() / row[nzr].min())
        hist[str(math.floor(bits))] = hist.get(str(math.floor(bits)), 0) + 1
        widest = max(widest, bits)
    out["block_range_histogram"] = dict(sorted(hist.items(), key=lambda kv: int(kv[0])))
    out["max_block_range_bits"] = widest
    out["element_range_bits"] = element_range_bits(elem)
    threshold = VERDICT_FRACTION * n
    if np.any(~np.isfinite(x)):
        out["verdict"] = "nonfinite"
    elif out["flushed"] > threshold:
        out["verdict"] = "block_underflow"
    elif out["underflow"] > threshold:
        out["verdict"] = "underflow"
    elif out["precision_loss"] > threshold:
        out["verdict"] = "precision"
    else:
        out["verdict"] = "ok"
    return out


def close(a, b):
    if isinstance(b, float):
        return a is not None and abs(a - b) <= 1e-12 * max(1.0, abs(b))
    return a == b


def cases(rng):
    g = rng.standard_normal((48, 96)).astype(np.float32)
    outliers = g.copy()
    outliers[np.arange(48), rng.integers(0, 96, 48)] = 100.0  # one per row
    yield "gaussian", g, -1
    yield "gaussian.axis0", g, 0
    yield "outlier_per_row", outliers, -1
    yield "float64", rng.standard_normal((5, 70)) * 1e3, -1  # short last blocks
    special = g[:4].copy()
    special[0, 3] = np.nan
    special[2, 40] = np.inf
    yield "nan_inf", special, -1
    tiny = np.concatenate([g[:2] * 1e-30, g[:2] * 1e3]).astype(np.float32)
    yield "tiny_blocks", tiny, -1
    three = rng.standard_normal((3, 40, 5)).astype(np.float32)
    three[:, :, 0] *= 1e-6
    yield "rank3.axis1", three, 1
    yield "zeros", np.zeros((2, 64), np.float32), -1


FORMATS = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1", "mxint8",
           "nvfp4", "tensor:float8_e4m3fn", "channel:float8_e4m3fn"]


def main():
    fpguard = sys.argv[sys.argv.index("--fpguard") + 1]
    rng = np.random.default_rng(2026)
    failures = checks = 0
    verdicts = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, x, axis in cases(rng):
            path = os.path.join(tmp, name + ".npy")
            np.save(path, x)
            r = subprocess.run([fpguard, "inspect", path, "--formats", ",".join(FORMATS),
                                "--axis", str(axis), "--json"], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {name}: exit {r.returncode}: {r.stderr.strip()}")
                failures += 1
                continue
            got = json.loads(r.stdout)["tensors"][0]["scaled_formats"]
            for fmt in FORMATS:
                want = expected(x, fmt, axis)
                verdicts[(name, fmt)] = got[fmt]["verdict"]
                for key, value in want.items():
                    checks += 1
                    if not close(got[fmt].get(key), value):
                        failures += 1
                        print(f"FAIL {name} {fmt} {key}: got {got[fmt].get(key)!r}, "
                              f"expected {value!r}")
    # The crafted case: an outlier per row flushes its FP4 block, not its FP8 one.
    for fmt, verdict in [("mxfp4_e2m1", "block_underflow"), ("mxfp8_e4m3", "ok")]:
        checks += 1
        if verdicts.get(("outlier_per_row", fmt)) != verdict:
            failures += 1
            print(f"FAIL outlier_per_row {fmt}: verdict {verdicts.get(('outlier_per_row', fmt))}"
                  f", expected {verdict}")
    print(f"{checks - failures} of {checks} checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
