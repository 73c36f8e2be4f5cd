"""NumPy computing what `fpguard inspect` computes for three formats (float16, bfloat16,
float8_e4m3fn), on the same data as bench/stats_bench.cpp (64 MiB of float32, "typical"
N(0,1) or "wide" N(0,1)*2^k, k in [-20, 20]): min/max/absmax, NaN/inf counts, and per
format the overflow and underflow counts. float16 uses astype (NumPy's own cast);
NumPy has no bfloat16 or FP8, so those two are counted by threshold compares on |x|
(cheaper than a real cast, which makes the ratio conservative). Single-threaded NumPy
(as it is for these ops). Prints one JSON line per data kind: {"kind", "seconds"}.

Usage: /usr/bin/python3 bench/numpy_stats.py [repeats]"""
import json
import sys
import time

import numpy as np

N = (64 << 20) // 4


def data(kind):
    # Not bit-identical to the C++ data (another generator), same distribution.
    rng = np.random.default_rng(42)
    x = rng.standard_normal(N, dtype=np.float32)
    if kind == 1:
        x = np.ldexp(x, rng.integers(-20, 21, N)).astype(np.float32)
    return x


def numpy_stats(x):
    out = {}
    finite = np.isfinite(x)
    out["nan"] = int(np.isnan(x).sum())
    out["inf"] = int(np.isinf(x).sum())
    out["min"] = float(x.min())
    out["max"] = float(x.max())
    ax = np.abs(x)
    out["absmax"] = float(ax.max())
    nonzero = x != 0
    with np.errstate(over="ignore"):
        r16 = x.astype(np.float16)
    out["f16_overflow"] = int((np.isinf(r16) & finite).sum())
    out["f16_underflow"] = int(((r16 == 0) & nonzero).sum())
    out["bf16_overflow"] = int((ax >= np.float32(3.3961514e38)).sum())
    out["bf16_underflow"] = int(((ax <= np.float32(2.0**-134)) & nonzero).sum())
    out["e4m3_overflow"] = int((ax > 464.0).sum())
    out["e4m3_underflow"] = int(((ax <= 2.0**-10) & nonzero).sum())
    return out


def main():
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    for kind in (0, 1):
        x = data(kind)
        best = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            numpy_stats(x)
            best = min(best, time.perf_counter() - t)
        print(json.dumps({"kind": kind, "seconds": best}))


if __name__ == "__main__":
    main()
