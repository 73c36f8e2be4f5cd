#!/usr/bin/python3
"""`fpguard round` into scaled formats (OCP MX, NVFP4, scaled FP8) against the NumPy
reference in mxref.py, bit for bit: the values written, and with --encode the element
codes, the scale codes (or float scales) and NVFP4's global scale.

    mx_test.py --fpguard PATH
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fpgref  # noqa: E402
import mxref  # noqa: E402

import numpy as np  # noqa: E402

MX = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1", "mxint8"]


def same_bits(a, b):
    """Equal bit for bit, any NaN equal to any NaN."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    u = np.uint32 if a.dtype == np.float32 else np.uint64
    both_nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(both_nan | (a.view(u) == b.view(u))))


def first_difference(a, b):
    if a.shape != b.shape:
        return f"shape {a.shape} vs {b.shape}"
    bad = ~((np.isnan(a) & np.isnan(b)) | (a == b) & (np.signbit(a) == np.signbit(b)))
    i = np.argwhere(bad)
    if not len(i):
        return "dtype"
    k = tuple(i[0])
    return f"{len(i)} differ, first at {k}: got {a[k]!r}, expected {b[k]!r}"


def all_element_values(fmt):
    """Every value of the element format (decoded from every code), float64."""
    elem = mxref.SCALED[fmt][0]
    e, m, bias, vmax, _, _ = mxref.ELEMENTS[elem]
    if e is None:
        return np.arange(-127, 128) / 64.0
    vals = []
    for code in range(1 << (1 + e + m)):
        sign = -1.0 if code >> (e + m) else 1.0
        ef = (code >> m) & ((1 << e) - 1)
        mf = code & ((1 << m) - 1)
        v = mf * 2.0 ** (1 - bias - m) if ef == 0 else (1 + mf / 2**m) * 2.0 ** (ef - bias)
        if v <= vmax:  # the rest are NaN/inf codes
            vals.append(sign * v)
    return np.array(vals)


def cases(rng):
    """(name, array, axis) inputs covering the definitions' corners."""
    out = []
    for fmt_vals in ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1", "mxint8"):
        v = all_element_values(fmt_vals)
        rows = []
        for s in (-140, -127, -30, -1, 0, 1, 30, 120):  # one row per scale
            with np.errstate(over="ignore"):
                rows.append(rng.permutation((v * 2.0**s).astype(np.float32)))
        out.append((f"every code of {fmt_vals} x 2^-140..2^120", np.stack(rows), -1))
    x = rng.standard_normal((3, 37, 70)).astype(np.float32)
    x[0, 3, 5] = 1e4  # one outlier: its block's neighbours flush
    for axis in (0, 1, -1):
        out.append((f"normal 3-D axis {axis}", x, axis))
    z = np.zeros((2, 64), np.float32)
    z[1, :] = -0.0
    out.append(("all zero blocks", z, -1))
    sub = (rng.standard_normal((2, 64)) * 1e-40).astype(np.float32)  # float32 subnormals
    out.append(("all subnormal blocks (shared_exp clamps at -127)", sub, -1))
    special = rng.standard_normal((6, 32)).astype(np.float32)
    special[0, 7], special[1, 0], special[2, 31] = np.nan, np.inf, -np.inf
    out.append(("a NaN or an inf in a block", special, -1))
    for k in (-3, 0, 5, 100):
        p2 = rng.uniform(-1, 1, (4, 32)).astype(np.float32) * np.float32(2.0**k)
        p2[0, 0] = np.float32(2.0**k)
        p2[1, 1] = np.nextafter(np.float32(2.0**k), np.float32(0))
        p2[2, 2] = -np.float32(2.0**k)
        p2[3, 3] = np.nextafter(np.float32(2.0**(k + 1)), np.float32(0))
        out.append((f"block max at 2^{k} and one ulp below", p2, -1))
    out.append(("short last blocks", rng.standard_normal((5, 45)).astype(np.float32) * 100, -1))
    out.append(("one value", np.array([3.3], np.float32), -1))
    wide = rng.standard_normal((2, 40)) * 1e300  # float64: shared_exp clamps at +127
    wide[1] = rng.standard_normal(40) * 1e-300  # ... and at -127
    out.append(("float64 beyond 2^127 (clamps at +127) and tiny", wide, -1))
    return out


def nvfp4_cases(rng):
    x = rng.standard_normal((4, 48)).astype(np.float32)
    x[0, 0] = 1e30  # the tensor scale follows it: every other block's scale flushes to 0
    y = rng.standard_normal((4, 48)).astype(np.float32) * 3
    y[2, 5] = 700.0  # its block's scale is the tensor's max: 448, saturating on rounding
    z = rng.standard_normal((3, 5, 20)).astype(np.float32)
    return [("nvfp4 flush to 0", x, -1), ("nvfp4 saturating scale", y, -1),
            ("nvfp4 3-D axis 1", z, 1), ("nvfp4 3-D axis 0", z, 0),
            ("nvfp4 zeros", np.zeros((2, 16), np.float32), -1)]


def run_round(ck, binary, tmp, fmt, x, axis, encode):
    src = os.path.join(tmp, "x.npy")
    np.save(src, x)
    out = os.path.join(tmp, "y.npz" if encode else "y.npy")
    argv = ["round", fmt, src, "-o", out, "--axis", str(axis)] + (["--encode"] if encode else [])
    r = fpgref.run(binary, *argv)
    if r.returncode != 0:
        ck.check(False, f"{fmt} {' '.join(argv)}", f"exit {r.returncode}: {r.stderr}")
        return None
    return np.load(out)


def compare(ck, binary, tmp, fmt, case, x, axis, ref):
    """`round` (values) and `round --encode` (codes, scales, global_scale) against `ref`, a
    dict of the reference's arrays; float scales bit for bit, codes exactly."""
    vals = ref["values"]
    got = run_round(ck, binary, tmp, fmt, x, axis, False)
    if got is not None:
        ck.check(same_bits(got, vals), case + ": values", first_difference(got, vals))
    enc = run_round(ck, binary, tmp, fmt, x, axis, True)
    if enc is None:
        return
    codes, scales = ref["codes"], ref["scales"]
    ck.check(enc["codes"].dtype == codes.dtype and np.array_equal(enc["codes"], codes),
             case + ": codes", f"{enc['codes'].dtype} vs {codes.dtype}")
    same = same_bits if scales.dtype.kind == "f" else np.array_equal
    ck.check(same(enc["scales"], scales), case + ": scales",
             f"got {enc['scales'].ravel()[:8]}, expected {scales.ravel()[:8]}")
    if "global_scale" in ref:
        g = ref["global_scale"]
        ck.check(enc["global_scale"].dtype == np.float32 and enc["global_scale"] == g,
                 case + ": global scale", f"got {enc['global_scale']!r}, expected {g!r}")


def compare_mx(ck, binary, tmp, fmt, name, x, axis):
    vals, codes, scales = mxref.quantize_mx(x, fmt, axis)
    compare(ck, binary, tmp, fmt, f"{fmt}, {name}", x, axis,
            {"values": vals, "codes": codes, "scales": scales})


def compare_nvfp4(ck, binary, tmp, name, x, axis):
    vals, codes, scales, g = mxref.quantize_nvfp4(x, axis)
    compare(ck, binary, tmp, "nvfp4", name, x, axis,
            {"values": vals, "codes": codes, "scales": scales, "global_scale": g})


def compare_amax(ck, binary, tmp, fmt, name, x, axis):
    vals, codes, scales = mxref.quantize_amax(x, fmt, axis)
    compare(ck, binary, tmp, fmt, f"{fmt}, {name}", x, axis,
            {"values": vals, "codes": codes, "scales": scales})


def main():
    args = fpgref.parse_args(__doc__)
    ck = fpgref.Checker("mx_test.py")
    rng = np.random.default_rng(21)
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in MX:
            for name, x, axis in cases(rng):
                ck.run_case(f"{fmt} {name}", compare_mx, ck, args.fpguard, tmp, fmt, name, x, axis)
        for name, x, axis in nvfp4_cases(rng):
            ck.run_case(name, compare_nvfp4, ck, args.fpguard, tmp, name, x, axis)
        w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 50
        w[2] *= 1e3  # one channel far larger than the rest
        act = rng.standard_normal((4, 64)).astype(np.float32) * 1e4
        for fmt in ("tensor:float8_e4m3fn", "tensor:float8_e5m2", "channel:float8_e4m3fn",
                    "channel:float8_e5m2"):
            for name, x, axis in (("conv weight", w, 0), ("activation", act, 0),
                                  ("activation, axis 1", act, 1),
                                  ("zeros", np.zeros((3, 4), np.float32), 0)):
                ck.run_case(f"{fmt} {name}", compare_amax, ck, args.fpguard, tmp, fmt, name,
                            x, axis)
    ck.finish()


if __name__ == "__main__":
    main()
