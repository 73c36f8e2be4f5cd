"""`fpguard inspect --json` against NumPy: every field of the tensor statistics and of the
per-format findings, on crafted tensors (values at max, max + half ulp, subnormal
boundaries, NaN/inf, -0) and on random data.

The per-format rounding reference is written here in NumPy from the format's numbers:
x is scaled by the quantum of its binade (an exact power of two), rounded with
np.rint (ties to even) and scaled back, so it shares no code with fpguard. For float16
it is also checked against NumPy's own astype(np.float16).
"""

import json
import math
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fpgref  # noqa: E402

# name: (exponent bits, mantissa bits, bias, nan encoding)
FORMATS = {
    "float16": (5, 10, 15, "ieee"),
    "bfloat16": (8, 7, 127, "ieee"),
    "float8_e4m3fn": (4, 3, 7, "fn"),
    "float8_e5m2": (5, 2, 15, "ieee"),
    "float8_e4m3fnuz": (4, 3, 8, "fnuz"),
    "float6_e3m2fn": (3, 2, 3, "none"),
    "float4_e2m1fn": (2, 1, 1, "none"),
}


def fmt_max(e, m, bias, nan):
    top = 2**e - 1
    if nan == "ieee":
        return (2 - 2.0**-m) * 2.0 ** (top - 1 - bias)
    if nan == "fn":
        return (2 - 2.0 ** (1 - m)) * 2.0 ** (top - bias)
    return (2 - 2.0**-m) * 2.0 ** (top - bias)


def round_rne(x, e, m, bias):
    """Nearest-even rounding with unbounded exponent range above (overflow is judged by
    the caller) and the format's subnormal quantum below. x: float64 array, finite."""
    emin = 1 - bias
    ax = np.abs(x)
    with np.errstate(divide="ignore"):
        lg = np.floor(np.log2(np.where(ax > 0, ax, 1.0)))
    # log2 may be off by one at binade edges: correct it exactly.
    lg = np.where(np.ldexp(1.0, lg.astype(int)) > ax, lg - 1, lg)
    lg = np.where(np.ldexp(1.0, (lg + 1).astype(int)) <= ax, lg + 1, lg)
    q = np.maximum(lg, emin) - m
    r = np.ldexp(np.rint(np.ldexp(ax, (-q).astype(int))), q.astype(int))
    return np.copysign(np.where(ax > 0, r, 0.0), x)


def expected(x, formats, margin):
    """The inspect JSON fields computed with NumPy in float64."""
    x64 = x.astype(np.float64)
    fin = np.isfinite(x64)
    xf = x64[fin]
    nz = xf[xf != 0]
    out = {
        "count": x.size,
        "nan": int(np.isnan(x64).sum()),
        "posinf": int(np.isposinf(x64).sum()),
        "neginf": int(np.isneginf(x64).sum()),
        "zeros": int((xf == 0).sum()),
        "min": float(xf.min()) if xf.size else None,
        "max": float(xf.max()) if xf.size else None,
        "absmax": float(np.abs(xf).max()) if xf.size else None,
        "min_abs_nonzero": float(np.abs(nz).min()) if nz.size else None,
        "mean": float(np.mean(xf)) if xf.size else None,
        "std": float(np.std(xf)) if xf.size else None,
    }
    hist = {}
    if nz.size:
        _, ex = np.frexp(np.abs(nz))
        for k, c in zip(*np.unique(ex - 1, return_counts=True)):
            hist[str(int(k))] = int(c)
    out["exponent_histogram"] = hist
    absmax = out["absmax"] or 0.0
    fmts = {}
    for name in formats:
        e, m, bias, nan = FORMATS[name]
        fmax = fmt_max(e, m, bias, nan)
        r = round_rne(xf, e, m, bias)
        ovf = np.abs(r) > fmax
        ok = ~ovf
        xo, ro = xf[ok], r[ok]
        err = np.abs(ro - xo)
        nzm = xo != 0
        # fpguard computes the relative error in the input's precision (float32 here)
        rel_native = err[nzm].astype(x.dtype) / np.abs(xo[nzm]).astype(x.dtype)
        rel = rel_native.astype(np.float64)
        n_nonzero = nz.size
        # "more than half the significant bits lost": relative error above 2^-(p/2),
        # the threshold held in the input's precision as fpguard holds it
        threshold = np.array(2.0 ** (-(m + 1) / 2), dtype=x.dtype)
        precision_loss = int((rel_native > threshold).sum())
        underflow = int(((ro == 0) & nzm).sum())
        f = {
            "overflow": int(ovf.sum()),
            "underflow": underflow,
            "subnormal": int(((ro != 0) & (np.abs(ro) < 2.0 ** (1 - bias))).sum()),
            "max_abs_error": float(err.max()) if err.size else 0.0,
            "max_rel_error": float(rel.max()) if rel.size else 0.0,
            "mean_rel_error": float(rel.mean()) if rel.size else 0.0,
            "headroom_bits": math.log2(fmax / absmax) if absmax > 0 else None,
            "precision_loss": precision_loss,
        }
        # Largest k with absmax * 2^k <= margin * max (and its square), by search.
        def largest_k(ok_fn):
            k = 0
            while not ok_fn(k):
                k -= 1
            while ok_fn(k + 1):
                k += 1
            return 2.0**k

        f["scale"] = largest_k(lambda k: absmax * 2.0**k <= margin * fmax) if absmax > 0 else 1.0
        f["scale_for_square"] = (largest_k(lambda k: (absmax * 2.0**k) * (absmax * 2.0**k)
                                           <= margin * fmax)
                                 if absmax > 0 else 1.0)
        nonfinite = out["nan"] + out["posinf"] + out["neginf"]
        if nonfinite:
            v = "nonfinite"
        elif f["overflow"]:
            v = "overflow"
        elif underflow > 0.01 * n_nonzero:
            v = "underflow"
        elif precision_loss > 0.01 * n_nonzero:
            v = "precision"
        else:
            v = "ok"
        f["verdict"] = v
        fmts[name] = f
    out["formats"] = fmts
    return out


def close(a, b, rel):
    if a is None or b is None:
        return a is None and b is None
    if a == b:
        return True
    return abs(a - b) <= rel * max(abs(a), abs(b))


def compare(c, case, got, exp):
    for k in ("count", "nan", "posinf", "neginf", "zeros", "min", "max", "absmax",
              "min_abs_nonzero", "exponent_histogram"):
        c.equal(got[k], exp[k], f"{case}: {k}")
    c.check(close(got["mean"], exp["mean"], 1e-12), f"{case}: mean",
            f"got {got['mean']!r}, expected {exp['mean']!r}")
    c.check(close(got["std"], exp["std"], 1e-12), f"{case}: std",
            f"got {got['std']!r}, expected {exp['std']!r}")
    for name, ef in exp["formats"].items():
        gf = got["formats"][name]
        for k in ("overflow", "underflow", "subnormal", "precision_loss", "max_abs_error",
                  "max_rel_error", "scale", "scale_for_square", "verdict"):
            c.equal(gf[k], ef[k], f"{case}: {name}.{k}")
        c.check(close(gf["headroom_bits"], ef["headroom_bits"], 1e-14),
                f"{case}: {name}.headroom_bits", f"got {gf['headroom_bits']}, "
                f"expected {ef['headroom_bits']}")
        c.check(close(gf["mean_rel_error"], ef["mean_rel_error"], 1e-6),
                f"{case}: {name}.mean_rel_error",
                f"got {gf['mean_rel_error']}, expected {ef['mean_rel_error']}")


def crafted():
    """Values at the edges of every format in FORMATS, in float32."""
    vals = [0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0, 3.0]
    for e, m, bias, nan in FORMATS.values():
        fmax = fmt_max(e, m, bias, nan)
        half_ulp = 2.0 ** (math.floor(math.log2(fmax)) - m - 1)
        sub = 2.0 ** (1 - bias - m)
        vals += [fmax, -fmax, fmax + half_ulp, fmax + half_ulp / 2, fmax + 2 * half_ulp,
                 sub, sub / 2, sub * 0.75, sub * 0.5000001, 2.0 ** (1 - bias),
                 2.0 ** (1 - bias) - sub / 2, 2.0 ** (1 - bias) * 1.5]
    return np.array(vals, dtype=np.float32)


def outliers(rng):
    x = rng.standard_normal(50_000).astype(np.float32)
    x[::4096] = 1e5
    x[::4096 * 3] = -3e5
    x[0] = np.nan
    return x


def main():
    args = fpgref.parse_args(__doc__)
    c = fpgref.Checker("stats_test")
    names = list(FORMATS)
    rng = np.random.default_rng(2026)
    x_f16 = (rng.standard_normal(100_000) * 1000).astype(np.float32)
    # The NumPy rounding reference itself, against NumPy's float16 cast.
    r = round_rne(x_f16.astype(np.float64), 5, 10, 15)
    ref16 = x_f16.astype(np.float16).astype(np.float64)
    mask = np.abs(r) <= 65504
    c.check(np.array_equal(r[mask], ref16[mask]), "reference rounding == astype(float16)")

    cases = {
        "crafted": crafted(),
        "crafted_finite": crafted()[np.isfinite(crafted())],
        "normal_1e3": x_f16,
        "wide": (rng.standard_normal(300_001) * np.exp2(rng.integers(-30, 30, 300_001)))
        .astype(np.float32),
        "tiny": (rng.standard_normal(5000) * 1e-6).astype(np.float32),
        "empty": np.zeros(0, dtype=np.float32),
        "zeros": np.zeros(17, dtype=np.float32),
        "float64_input": rng.standard_normal(10_000) * 100.0,
        # The moments: a mean far from zero, and an outlier opening every 4096 values (a
        # shift far out in its chunk, where the one-pass sums would lose bits), after a
        # leading NaN.
        "offset": (3e4 + rng.standard_normal(100_000)).astype(np.float32),
        "outliers": outliers(rng),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for case, x in cases.items():
            path = os.path.join(tmp, case + ".npy")
            np.save(path, x)
            fmts = names if x.dtype == np.float32 else ["float16", "bfloat16"]
            for margin in (0.5, 0.125):
                res = fpgref.run(args.fpguard, "inspect", path, "--json", "--formats",
                                 ",".join(fmts), "--margin", margin)
                if not c.check(res.returncode == 0, f"{case}: exit code",
                               f"{res.returncode}: {res.stderr}"):
                    continue
                got = json.loads(res.stdout)
                c.equal(got["schema_version"], 1, f"{case}: schema_version")
                t = got["tensors"][0]
                c.equal(t["dtype"], str(x.dtype), f"{case}: dtype")
                c.equal(t["shape"], list(x.shape), f"{case}: shape")
                compare(c, f"{case} (margin {margin})", t, expected(x, fmts, margin))
        # --strict: exit 1 when a verdict is not ok, 0 otherwise.
        bad = os.path.join(tmp, "crafted.npy")
        good = os.path.join(tmp, "normal_1e3.npy")
        c.equal(fpgref.run(args.fpguard, "inspect", bad, "--strict").returncode, 1,
                "--strict with findings")
        c.equal(fpgref.run(args.fpguard, "inspect", good, "--strict", "--formats",
                           "bf16").returncode, 0, "--strict without findings")
    c.finish()


if __name__ == "__main__":
    main()
