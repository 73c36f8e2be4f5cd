#!/usr/bin/python3
"""The precision experiments against independent references.

gemm-error: gemm_dump writes every matrix of one experiment; this script checks each step
with code that shares nothing with fpguard — input rounding against NumPy's float16 cast
and exact rationals (fpgref.round_exact), the truth against exact rational products, the
low-precision accumulation against a rational emulation that rounds every partial sum,
and every reported number against NumPy recomputing it from the matrices.
accum: stagnation counts and naive/pairwise/Kahan sums against NumPy float16, torch
bfloat16 and rational fp8 arithmetic. CLI: JSON schemas, orderings, bad input.

    experiments_test.py --fpguard PATH --gemm-dump PATH
"""

import json
import math
import os
import sys
import tempfile
from fractions import Fraction

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fpgref  # noqa: E402
import mxref  # noqa: E402

SPECS = {s.name: s for s in fpgref.named_specs()}


def spec(name):
    return SPECS[name] if name in SPECS else fpgref.custom_spec(name)


def rnd(x, sp):
    """x (a Fraction or float) rounded to nearest-even in spec sp, as a Fraction (or inf/nan)."""
    if isinstance(x, float) and not math.isfinite(x):
        return math.nan if math.isnan(x) else x if sp.has_inf else math.nan
    v = fpgref.round_exact(fpgref.Val.fin(Fraction(x)), sp)
    if v.kind != "fin":
        return math.nan if v.kind == "nan" else (-math.inf if v.neg else math.inf)
    return -v.mag if v.neg else v.mag


def unit_roundoff(sp):
    return 2.0 ** -(sp.m + 1)


# ---- gemm_dump ------------------------------------------------------------------------


def dump(c, args, tmp, n, fmt, acc="same", out="same", order="auto", dist="normal", seed=3,
         sample=0):
    d = tempfile.mkdtemp(dir=tmp)
    r = fpgref.run(args.gemm_dump, d, n, fmt, acc, out, order, dist, seed, sample)
    if not c.check(r.returncode == 0, f"gemm_dump {fmt} {acc} {order}", r.stderr):
        return None, None
    m = {k: np.load(os.path.join(d, k + ".npy"))
         for k in ("a", "b", "a_rounded", "b_rounded", "c", "c_ref", "c_ref_unrounded", "abs_ab")}
    if os.path.exists(os.path.join(d, "input_bound.npy")):
        m["input_bound"] = np.load(os.path.join(d, "input_bound.npy"))
    return m, json.loads(r.stdout)


def exact_matmul(a, b):
    n = a.shape[0]
    fa = [[Fraction(float(x)) for x in row] for row in a]
    fb = [[Fraction(float(x)) for x in row] for row in b]
    return [[sum(fa[i][k] * fb[k][j] for k in range(n)) for j in range(n)] for i in range(n)]


def emulate(a, b, acc_spec, order, outer_spec=None):
    """C = A B with exact products and every addition rounded into acc_spec."""
    n = a.shape[0]
    fa = [[Fraction(float(x)) for x in row] for row in a]
    fb = [[Fraction(float(x)) for x in row] for row in b]

    def fl(x):
        return rnd(x, acc_spec)

    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            p = [fa[i][k] * fb[k][j] for k in range(n)]
            if order == "sequential":
                s = Fraction(0)
                for x in p:
                    s = fl(s + x)
            elif order.startswith("blocked:"):
                K = int(order.split(":")[1])
                s = Fraction(0)
                for k0 in range(0, n, K):
                    chunk = Fraction(0)
                    for x in p[k0:k0 + K]:
                        chunk = fl(chunk + x)
                    s = rnd(s + chunk, outer_spec)
            else:  # pairwise: binary counter over the products, then fold right to left
                stack = []
                for x in p:
                    stack.append([0, x])
                    while len(stack) >= 2 and stack[-1][0] == stack[-2][0]:
                        r = stack.pop()
                        stack[-1] = [stack[-1][0] + 1, fl(stack[-1][1] + r[1])]
                while len(stack) >= 2:
                    r = stack.pop()
                    stack[-1] = [max(stack[-1][0], r[0]) + 1, fl(stack[-1][1] + r[1])]
                s = stack[0][1] if stack[0][0] > 0 else fl(stack[0][1])
            out[i, j] = float(s)
    return out


def check_metrics(c, case, m, row, acc_name, out_name, library=False):
    """Every number of the row, recomputed with NumPy from the matrices (docs/experiments.md)."""
    n = m["a"].shape[0]
    C, R, U, AB = m["c"], m["c_ref"], m["c_ref_unrounded"], m["abs_ab"]
    acc, out = spec(acc_name), spec(out_name)
    u = 2.0 ** -24 if library else unit_roundoff(acc)
    holds = (out.m >= acc.m and out.emax >= acc.emax and
             out.emin - out.m <= acc.emin - acc.m)
    u_out = 0.0 if holds else unit_roundoff(out)
    eta = 0.0 if holds else float(out.min_positive) / 2
    g = n * u / (1 - n * u) if n * u < 1 else math.inf
    e = np.abs(C - R)
    floor = max(u, u_out) * np.abs(R).max()
    rn, abn = np.linalg.norm(R), np.linalg.norm(AB)
    want = {
        "mean_abs_error": e.mean(),
        "max_abs_error": e.max(),
        "max_rel_error": (e / np.maximum(np.abs(R), floor)).max(),
        "normwise_error": np.linalg.norm(C - R) / rn,
        "bound_deterministic": (g * (1 + u_out) * abn + u_out * rn + n * eta) / rn,
        "bound_probabilistic": (math.sqrt(n) * u * abn + u_out * rn + n * eta) / rn,
        "rel_floor": floor,
    }
    if np.array_equal(m["a"], m["a_rounded"]) and np.array_equal(m["b"], m["b_rounded"]):
        want["input_rounding_error"] = 0.0
    elif acc.m + 1 <= 24:
        want["input_rounding_error"] = np.linalg.norm(R - U) / np.linalg.norm(U)
    for k, v in want.items():
        got = row[k]
        if math.isinf(v):
            c.check(got is None, f"{case}: {k} is null (no bound)", repr(got))
            continue
        c.check(got is not None and abs(got - v) <= 1e-9 * abs(v) + 1e-300,
                f"{case}: {k}", f"got {got!r}, NumPy {v!r}")
    # The true bound of the docs holds elementwise, and the row says so.
    if math.isfinite(g):
        lim = g * (1 + u_out) * AB + u_out * np.abs(R) + eta + 4 * n * 2.0**-53 * AB
        c.check(bool((e <= lim).all()), f"{case}: every element under gamma_n |A||B|")
        c.equal(row["bound_violations"], 0, f"{case}: bound_violations")


def gemm_cases(c, args, tmp):
    # float16 inputs: NumPy's float64 -> float16 cast is correctly rounded.
    m, row = dump(c, args, tmp, 12, "float16", "float16", "float32", "sequential")
    if m is not None:
        c.check(np.array_equal(m["a_rounded"], m["a"].astype(np.float16).astype(np.float64)),
                "fp16: A rounded as NumPy's astype(float16)")
        c.check(np.array_equal(m["b_rounded"], m["b"].astype(np.float16).astype(np.float64)),
                "fp16: B rounded as NumPy's astype(float16)")
        exact = exact_matmul(m["a_rounded"], m["b_rounded"])
        n = 12
        ok = all(abs(Fraction(float(m["c_ref"][i, j])) - exact[i][j]) <=
                 Fraction(2 * n) * Fraction(2) ** -53 * Fraction(float(m["abs_ab"][i, j]))
                 for i in range(n) for j in range(n))
        c.check(ok, "fp16: the double truth is within n 2^-53 |A||B| of the exact product")
        em = emulate(m["a_rounded"], m["b_rounded"], spec("float16"), "sequential")
        c.check(np.array_equal(m["c"], em), "fp16 sequential accumulation = rational emulation",
                f"max diff {np.abs(m['c'] - em).max()}")
        check_metrics(c, "fp16/fp16 seq", m, row, "float16", "float32")

    # bfloat16 in bfloat16, pairwise over 13 terms (not a power of two), rounded exactly.
    m, row = dump(c, args, tmp, 13, "bfloat16", "same", "float32", "pairwise")
    if m is not None:
        bf = spec("bfloat16")
        want = np.vectorize(lambda x: float(rnd(x, bf)))(m["a"])
        c.check(np.array_equal(m["a_rounded"], want), "bf16: A rounded exactly")
        em = emulate(m["a_rounded"], m["b_rounded"], bf, "pairwise")
        c.check(np.array_equal(m["c"], em), "bf16 pairwise accumulation = rational emulation",
                f"max diff {np.abs(m['c'] - em).max()}")
        check_metrics(c, "bf16/bf16 pairwise", m, row, "bfloat16", "float32")

    # fp8 inputs, 14-bit accumulator, promoted to float32 every 4 products (Hopper-style).
    m, row = dump(c, args, tmp, 10, "float8_e4m3fn", "e8m13", "float32", "blocked:4")
    if m is not None:
        em = emulate(m["a_rounded"], m["b_rounded"], spec("e8m13"), "blocked:4",
                     outer_spec=spec("float32"))
        c.check(np.array_equal(m["c"], em), "e4m3 blocked:4 in e8m13 = rational emulation")
        check_metrics(c, "e4m3/e8m13 blocked:4", m, row, "e8m13", "float32")

    # float64: sequential fused multiply-adds, against a compensated (Dot2) truth.
    m, row = dump(c, args, tmp, 9, "float64", "same", "same", "auto")
    if m is not None:
        c.equal(row["accumulate"], "float64", "fp64: accumulates in float64")
        n = 9
        exact = exact_matmul(m["a"], m["b"])
        ok = all(abs(Fraction(float(m["c_ref"][i, j])) - exact[i][j]) <=
                 Fraction(2) ** -52 * abs(exact[i][j]) + Fraction(2) ** -200
                 for i in range(n) for j in range(n))
        c.check(ok, "fp64: the Dot2 truth is the exact product to within 2^-52")
        fa = [[Fraction(float(x)) for x in row_] for row_ in m["a"]]
        fb = [[Fraction(float(x)) for x in row_] for row_ in m["b"]]
        em = np.zeros((n, n))
        for i in range(n):
            for j in range(n):
                s = Fraction(0)
                for k in range(n):
                    s = Fraction(float(s + fa[i][k] * fb[k][j]))  # float() rounds correctly
                em[i, j] = float(s)
        c.check(np.array_equal(m["c"], em), "fp64 = chain of correctly rounded FMAs")
        c.equal(row["input_rounding_error"], 0.0, "fp64: no input rounding")
        check_metrics(c, "fp64", m, row, "float64", "float64")

    # The default: float16 inputs, oneDNN sgemm (float32 accumulation), float16 output.
    m, row = dump(c, args, tmp, 40, "float16", "float32")
    if m is not None:
        c.equal(row["accumulation"], "library", "fp16 default: library order")
        c.check(np.array_equal(m["c"], m["c"].astype(np.float16).astype(np.float64)),
                "fp16 default: C holds float16 values")
        check_metrics(c, "fp16 library", m, row, "float32", "float16", library=True)
        # torch's float32 matmul of the same carriers lands within a float16 ulp or so.
        try:
            import torch
            t = (torch.from_numpy(m["a_rounded"]).float() @ torch.from_numpy(m["b_rounded"]).float())
            t16 = t.half().double().numpy()
            c.check(np.abs(t16 - m["c"]).max() <= 2 * 2.0**-10 * np.abs(m["c"]).max(),
                    "fp16 default: agrees with torch's float32 matmul rounded to float16")
        except ImportError:
            pass

    # Uniform data and seeds: samples differ, formats share A and B.
    m1, _ = dump(c, args, tmp, 6, "float16", dist="uniform:-2:3", seed=1)
    m2, _ = dump(c, args, tmp, 6, "bfloat16", dist="uniform:-2:3", seed=1)
    m3, _ = dump(c, args, tmp, 6, "float16", dist="uniform:-2:3", seed=1, sample=1)
    if m1 is not None and m2 is not None and m3 is not None:
        c.check(np.array_equal(m1["a"], m2["a"]), "same seed: same A for every format")
        c.check(not np.array_equal(m1["a"], m3["a"]), "another sample: another A")
        c.check(bool(((m1["a"] >= -2) & (m1["a"] < 3)).all()), "uniform:-2:3 stays in [-2, 3)")


# ---- scaled input formats ---------------------------------------------------------

def e4m3_value(code):
    """Non-negative E4M3 codes as their values."""
    code = np.asarray(code, dtype=np.int64)
    e, f = (code >> 3) & 15, (code & 7) / 8.0
    return np.where(e == 0, f * 2.0**-6, (1 + f) * np.ldexp(1.0, e - 7))


def per_group(v, axis, size):
    """Per block of `size` along `axis` of an n x n array: v's values (one per block, v's
    `axis` indexing the blocks) broadcast back onto the block's elements."""
    n = v.shape[1 - axis]  # square: the blocked axis has the other axis' extent
    w = np.moveaxis(v, axis, -1)
    return np.moveaxis(np.repeat(w, size, axis=-1)[..., :n], -1, axis)


def block_amax(x, axis, size):
    b, _ = mxref.blocks_view(np.abs(x), axis, size)  # [..., nblocks, size], axis moved last
    return per_group(np.moveaxis(b.max(axis=-1), -1, axis), axis, size)


def quantize_operand(x, fmt, which):
    """x (float64, n x n) as the executor quantizes MatMul operand `which` (docs/executor.md:
    blocks along K, i.e. A's rows and B's columns; channel: scales A per tensor and B per
    column), from mxref: (values, per-element scale S, per-element amax of its group)."""
    elem, _, size, kind = mxref.SCALED[fmt]
    x32 = x.astype(np.float32)
    axis = 1 if which == 0 else 0
    if kind == "mx":
        v, _, sc = mxref.quantize_mx(x32, fmt, axis=axis)
        s = per_group(np.ldexp(1.0, sc.astype(np.int64) - 127), axis, size)
        return v.astype(np.float64), s, block_amax(x, axis, size)
    if kind == "nvfp4":
        v, _, sc, s_t = mxref.quantize_nvfp4(x32, axis=axis)
        s = per_group(e4m3_value(sc) * float(s_t), axis, size)
        return v.astype(np.float64), s, block_amax(x, axis, size)
    if kind == "channel" and which == 0:
        kind, fmt = "tensor", "tensor:" + elem
    v, _, sc = mxref.quantize_amax(x32, fmt, axis=1)
    if kind == "tensor":
        return v.astype(np.float64), np.full(x.shape, float(sc)), np.full(x.shape, np.abs(x).max())
    return (v.astype(np.float64), np.broadcast_to(sc.astype(np.float64), x.shape),
            np.broadcast_to(np.abs(x).max(axis=0), x.shape))


def a_priori_delta(fmt):
    """docs/experiments.md: |x - Q(x)| <= delta amax(group); power-of-two scales:
    delta = max(u, 1 - M / 2^(emax + 1)); amax scales: delta = u."""
    elem, _, _, kind = mxref.SCALED[fmt]
    _, m, _, vmax, emax, _ = mxref.ELEMENTS[elem]
    u = 2.0 ** -(m + 1)
    return max(u, 1 - vmax / 2.0 ** (emax + 1)) if kind == "mx" else u


def scaled_gemm_cases(c, args, tmp):
    for fmt, n in (("mxfp8_e4m3", 70), ("mxfp4_e2m1", 70), ("mxfp6_e2m3", 33), ("mxint8", 40),
                   ("nvfp4", 40), ("tensor:float8_e4m3fn", 24), ("channel:float8_e5m2", 24)):
        m, row = dump(c, args, tmp, n, fmt, "float32", "float32")
        if m is None:
            continue
        c.equal(row["format"], fmt, f"{fmt}: the row names the scaled format")
        c.equal(row["accumulation"], "library", f"{fmt}: float32 accumulation (library)")
        qa, sa, aa = quantize_operand(m["a"], fmt, 0)
        qb, sb, ab = quantize_operand(m["b"], fmt, 1)
        c.check(np.array_equal(m["a_rounded"], qa), f"{fmt}: A = mxref along K (rows)",
                f"{np.count_nonzero(m['a_rounded'] != qa)} differ")
        c.check(np.array_equal(m["b_rounded"], qb), f"{fmt}: B = mxref along K (columns)",
                f"{np.count_nonzero(m['b_rounded'] != qb)} differ")
        check_metrics(c, fmt, m, row, "float32", "float32", library=True)
        # The theory: each value within delta of its group's amax (float32 slop aside) ...
        slop = 5 * 2.0**-24
        d = a_priori_delta(fmt)
        if fmt != "nvfp4":  # NVFP4's delta depends on s_b's rounding: data bound only
            for name, x, q, amax in (("A", m["a"], qa, aa), ("B", m["b"], qb, ab)):
                c.check(bool((np.abs(x - q) <= (d + slop) * amax).all()),
                        f"{fmt}: |{name} - Q({name})| <= {d} amax(group)")
        # ... and under the data bound max(h S, amax - M S), from which the GEMM's follows.
        elem = mxref.SCALED[fmt][0]
        _, mb, _, vmax, emax, _ = mxref.ELEMENTS[elem]
        h = 2.0 ** (emax - mb - 1)
        bounds = []
        for name, x, q, s, amax in (("A", m["a"], qa, sa, aa), ("B", m["b"], qb, sb, ab)):
            e = np.where(s > 0, np.maximum(h * s, amax - vmax * s), amax) + slop * amax
            c.check(bool((np.abs(x - q) <= e).all()), f"{fmt}: |{name} - Q({name})| <= data bound")
            bounds.append(e)
        ea, eb = bounds
        want = ea @ (np.abs(m["b"]) + eb) + np.abs(m["a"]) @ eb
        got = m.get("input_bound")
        if not c.check(got is not None, f"{fmt}: an input bound"):
            continue
        c.check(bool(np.allclose(got, want, rtol=1e-9, atol=0)), f"{fmt}: input bound = NumPy's",
                f"max rel diff {np.max(np.abs(got - want) / want)}")
        U = m["c_ref_unrounded"]
        c.check(bool((np.abs(m["c_ref"] - U) <= want * (1 + 1e-9)).all()),
                f"{fmt}: |C_ref - C_ref(unrounded)| under the input bound")
        c.equal(row["input_bound_violations"], 0, f"{fmt}: input_bound_violations")
        v = np.linalg.norm(want) / np.linalg.norm(U)
        c.check(abs(row["input_rounding_bound"] - v) <= 1e-9 * v, f"{fmt}: input_rounding_bound",
                f"got {row['input_rounding_bound']!r}, NumPy {v!r}")
        c.check(row["input_rounding_error"] <= row["input_rounding_bound"],
                f"{fmt}: input error under its bound")


# ---- the CLI ------------------------------------------------------------------------

ROW_KEYS = ["size", "format", "accumulate", "accumulation", "mean_abs_error", "max_abs_error",
            "max_rel_error", "normwise_error", "input_rounding_error", "bound_deterministic",
            "bound_probabilistic"]
ACCUM_KEYS = ["format", "value", "stagnation_count", "naive_rel_error", "pairwise_rel_error",
              "kahan_rel_error", "n"]


def cli_json(c, args, *argv):
    r = fpgref.run(args.fpguard, *argv)
    if not c.check(r.returncode == 0, " ".join(map(str, argv)), r.stderr):
        return None
    return json.loads(r.stdout)


def gemm_cli(c, args):
    j = cli_json(c, args, "gemm-error", "--sizes", "32,64", "--formats", "fp16,bf16", "--json",
                 "--samples", "2")
    if j is None:
        return
    c.equal(j["schema_version"], 1, "gemm-error: schema_version")
    rows = j["rows"]
    c.equal([(r["size"], r["format"]) for r in rows],
            [(32, "float16"), (32, "bfloat16"), (64, "float16"), (64, "bfloat16")],
            "gemm-error: rows by size, then format")
    for r in rows:
        for k in ROW_KEYS:
            c.check(k in r, f"gemm-error row has {k}")
        c.check(r["normwise_error"] <= r["bound_deterministic"], "normwise under the bound")
        c.equal(r["bound_violations"], 0, "no element above the bound")
        c.equal(r["samples"], 2, "samples")
    for a, b in ((rows[0], rows[1]), (rows[2], rows[3])):
        c.check(b["normwise_error"] > 4 * a["normwise_error"], "bf16 error > 4x fp16 error")
    # fp16 accumulation: no deterministic bound once n u >= 1 (n = 2048 would be; 8-bit here).
    j = cli_json(c, args, "gemm-error", "--sizes", "16", "--formats", "float8_e5m2",
                 "--accumulate", "same", "--json")
    if j is not None:
        r = j["rows"][0]
        c.equal(r["bound_deterministic"], None, "e5m2 accumulation, n u = 2: no bound (null)")
        c.equal(r["bound_violations"], None, "no bound: no violation count")
        c.equal(r["accumulation"], "sequential", "low-precision accumulation: sequential")
    r = fpgref.run(args.fpguard, "gemm-error", "--sizes", "16", "--formats", "fp16")
    c.check(r.returncode == 0 and "normwise" in r.stdout and "float16" in r.stdout,
            "gemm-error: text table", r.stdout + r.stderr)


def accum_cli(c, args):
    import torch

    def np16(x):
        return np.float16(x)

    def tbf(x):
        return torch.tensor(float(x), dtype=torch.bfloat16)

    e4m3 = spec("float8_e4m3fn")

    def f8(x):
        return rnd(x, e4m3)

    # (format, converter to the format's scalar, to float)
    arith = {
        "float16": (np16, float),
        "bfloat16": (tbf, lambda t: float(t.item()) if hasattr(t, "item") else float(t)),
        "float8_e4m3fn": (f8, float),
    }
    for value in (1.0, 0.1, 3.0, 0.7, -2.5, 1e-3):
        for name, (conv, tof) in arith.items():
            j = cli_json(c, args, "accum", "--format", name, "--value", value, "--n", 600,
                         "--json")
            if j is None:
                continue
            r = j["rows"][0]
            for k in ACCUM_KEYS:
                c.check(k in r, f"accum row has {k}")
            case = f"accum {name} {value}"
            v = conv(value)
            c.equal(r["value"], tof(v), f"{case}: value as the format holds it")
            # Stagnation: add until s + v == s (or overflow).
            s, k = conv(0.0), 0
            while True:
                t = conv(s + v) if name == "float8_e4m3fn" else s + v
                if not math.isfinite(tof(t)):
                    want, ovf = None, k + 1
                    break
                if tof(t) == tof(s):
                    want, ovf = k, None
                    break
                s, k = t, k + 1
            c.equal(r["stagnation_count"], want, f"{case}: stagnation count")
            c.equal(r["overflow_count"], ovf, f"{case}: overflow count")
            n = r["n"]
            exact = n * tof(v)

            def rel(x):
                x = tof(x)
                return None if not math.isfinite(x) else abs(x - exact) / abs(exact)

            def add(a, b):
                return conv(a + b) if name == "float8_e4m3fn" else a + b

            def sub(a, b):
                return conv(a - b) if name == "float8_e4m3fn" else a - b

            s = conv(0.0)
            for _ in range(n):
                s = add(s, v)
            c.equal(r["naive_rel_error"], rel(s), f"{case}: naive")

            def pw(m):
                return v if m == 1 else add(pw(m // 2), pw(m - m // 2))

            c.equal(r["pairwise_rel_error"], rel(pw(n)), f"{case}: pairwise")
            s, comp = conv(0.0), conv(0.0)
            for _ in range(n):
                y = sub(v, comp)
                t = add(s, y)
                comp = sub(sub(t, s), y)
                s = t
            c.equal(r["kahan_rel_error"], rel(s), f"{case}: kahan")
    j = cli_json(c, args, "accum", "--format", "fp16", "--json")
    if j is not None:
        c.equal(j["rows"][0]["stagnation_count"], 2048, "ones in fp16 stagnate at exactly 2048")
    j = cli_json(c, args, "accum", "--all", "--json")
    if j is not None:
        names = [r["format"] for r in j["rows"]]
        c.check("float8_e8m0fnu" not in names and "float16" in names and "float64" in names,
                "accum --all: every named format but e8m0", repr(names))
        by = {r["format"]: r for r in j["rows"]}
        c.equal(by["float32"]["stagnation_count"], 2**24, "fp32 ones stagnate at 2^24")
        c.equal(by["float64"]["stagnation_count"], 2**53, "fp64 ones stagnate at 2^53")


def targets_cli(c, args):
    j = cli_json(c, args, "targets", "--json")
    if j is None:
        return
    by = {t["name"]: t for t in j["targets"]}
    for name in ("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120",
                 "cdna2", "cdna3"):
        c.check(name in by, f"targets: {name} listed")
    c.check("bfloat16" not in by["sm_75"]["matrix_formats"], "sm_75: no bf16 tensor cores")
    c.check("float8_e4m3fn" not in by["sm_86"]["matrix_formats"], "sm_86: no fp8")
    c.check("float8_e4m3fn" in by["sm_89"]["matrix_formats"], "sm_89: fp8")
    c.equal([t for t, v in by.items() if "float8_e4m3fnuz" in v["matrix_formats"]], ["cdna3"],
            "fnuz fp8 is CDNA3's only")
    for t in by.values():
        for f in t["matrix_formats"] + t["vector_formats"] + [t["recommended"]]:
            c.check(f in SPECS, f"targets {t['name']}: {f} is a canonical format name")
    r = fpgref.run(args.fpguard, "targets", "H100")
    c.check(r.returncode == 0 and r.stdout.startswith("sm_90"), "targets H100 -> sm_90", r.stdout)


BAD = [
    (["gemm-error", "--sizes", "12x"], ["--sizes", "'12x' is not a positive integer"]),
    (["gemm-error", "--sizes", "0"], ["--sizes"]),
    (["gemm-error", "--sizes", "64,"], ["--sizes"]),
    (["gemm-error", "--sizes", "100000000"], ["--sizes", "memory"]),
    (["gemm-error", "--formats", "fp17"], ["fp17", "did you mean"]),
    (["gemm-error", "--formats", "e8m0"], ["float8_e8m0fnu", "no sign"]),
    (["gemm-error", "--accumulation", "blocked:0"], ["--accumulation", "K must be"]),
    (["gemm-error", "--accumulation", "blocked"], ["--accumulation", "blocked:K"]),
    (["gemm-error", "--accumulation", "pairwsie"], ["did you mean 'pairwise'"]),
    (["gemm-error", "--accumulate", "fp15"], ["fp15"]),
    (["gemm-error", "--accumulate", "fp16", "--accumulation", "library"], ["library"]),
    (["gemm-error", "--distribution", "uniform:2:1"], ["--distribution"]),
    (["gemm-error", "--distribution", "gauss"], ["--distribution"]),
    (["gemm-error", "--samples", "0"], ["--samples"]),
    (["gemm-error", "--samples", "x"], ["--samples"]),
    (["accum"], ["--format"]),
    (["accum", "--format", "fp16", "--value", "1e-10"], ["--value", "zero in float16"]),
    (["accum", "--format", "fp16", "--value", "1e9"], ["--value"]),
    (["accum", "--format", "e8m0"], ["float8_e8m0fnu"]),
    (["accum", "--format", "fp16", "--all"], ["--all"]),
    (["targets", "sm_8"], ["target 'sm_8'", "did you mean"]),
    (["targets", "--format", "fp9"], ["fp9"]),
]


def bad_input(c, args):
    for argv, needles in BAD:
        r = fpgref.run(args.fpguard, *argv)
        case = " ".join(argv)
        c.equal(r.returncode, 2, f"{case}: exit 2")
        lines = r.stderr.splitlines()
        c.check(len(lines) == 1 and lines[0].startswith("fpguard: error: "),
                f"{case}: one error line", repr(r.stderr))
        for n in needles:
            c.check(n in r.stderr, f"{case}: names {n!r}", repr(r.stderr))
        c.equal(r.stdout, "", f"{case}: nothing on stdout")


def main():
    args = fpgref.parse_args(
        __doc__, lambda p: p.add_argument("--gemm-dump", required=True, help="gemm_dump binary"))
    c = fpgref.Checker("experiments_test.py")
    with tempfile.TemporaryDirectory() as tmp:
        c.run_case("gemm_dump", gemm_cases, c, args, tmp)
        c.run_case("gemm_dump scaled", scaled_gemm_cases, c, args, tmp)
    c.run_case("gemm-error CLI", gemm_cli, c, args)
    c.run_case("accum CLI", accum_cli, c, args)
    c.run_case("targets CLI", targets_cli, c, args)
    c.run_case("bad input", bad_input, c, args)
    c.finish()


if __name__ == "__main__":
    main()
