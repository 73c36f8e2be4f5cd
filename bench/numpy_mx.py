"""The NumPy reference of the scaled formats (tests/reference/mxref.py, vectorized)
quantizing what bench/round_bench.cpp's BM_round_scaled quantizes: 64 MiB of float32
N(0, 1) ("typical", kind 0) or N(0, 1) * 2^k, k in [-20, 20] ("wide", kind 1), as a
[rows, 4096] array with blocks along the last axis. Prints one JSON line per (format,
kind): {"format", "kind", "seconds"} (best of the repeats).

Usage: /usr/bin/python3 bench/numpy_mx.py [repeats]"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "reference"))
import mxref  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_stats  # noqa: E402



def data(kind):
    return numpy_stats.data(kind).reshape(-1, 4096)  # the stats benchmark's data


def main():
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for kind in (0, 1):
        x = data(kind)
        for fmt in ("mxfp8_e4m3", "mxfp4_e2m1"):
            best = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                mxref.quantize_mx(x, fmt, -1)
                best = min(best, time.perf_counter() - t0)
            print(json.dumps({"format": fmt, "kind": kind, "seconds": best}), flush=True)


if __name__ == "__main__":
    main()
