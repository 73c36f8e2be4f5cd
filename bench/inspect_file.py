#!/usr/bin/python3
"""`fpguard inspect` on a large .npy against memcpy (issue 20): the wall time of the whole
command (float16, bfloat16 and float8_e4m3fn, its default threads) as a user times it,
against NumPy's `copyto` of the same array in this process, timed after each run of each
binary (medians); with two binaries A and B, their rounds alternate and their
`--json --histogram` outputs must agree: every field identical, but the mean relative
errors (float sums, whose order of terms may change between versions) to 1e-9.

Distributions: `typical` N(0,1), `wide` N(0,1) x 3e4 (most values beyond float8's range),
`relu` max(N(0,1), 0) (a ReLU's outputs: half the values exactly 0).

Usage: bench/inspect_file.py FPGUARD_A [FPGUARD_B] [--rounds N] [--mib M]
(run it under `chrt -f 10` on a shared machine)"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

FORMATS = "float16,bfloat16,float8_e4m3fn"


def timed(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def memcpy_once(x, y):
    t0 = time.perf_counter()
    np.copyto(y, x)
    return time.perf_counter() - t0


def agree(a, b, key=None):
    """Whether two parsed --json outputs agree (see the module's docstring)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(agree(a[k], b[k], k) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(agree(x, y, key) for x, y in zip(a, b))
    if key == "mean_rel_error" and isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=0)
    return a == b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bins", nargs="+")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--mib", type=int, default=256)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(a.mib << 18, dtype=np.float32)
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as tmp:
        print(f"{'distribution':<10} {'memcpy ms':>9} " +
              " ".join(f"{'bin ' + chr(65 + i) + ' ms':>9} {'x memcpy':>8}"
                       for i in range(len(a.bins))) + f"  ({a.mib} MiB, median of {a.rounds})")
        for name, make in (("typical", lambda: x), ("wide", lambda: x * np.float32(3e4)),
                           ("relu", lambda: np.maximum(x, np.float32(0)))):
            path = os.path.join(tmp, name + ".npy")
            np.save(path, make())
            cmds = [[b, "inspect", path, "--formats", FORMATS] for b in a.bins]
            outs = [subprocess.run(c + ["--json", "--histogram"], check=True,
                                   capture_output=True).stdout for c in cmds]
            if not all(agree(json.loads(o), json.loads(outs[0])) for o in outs):
                sys.exit(f"{name}: the binaries' --json outputs differ")
            times = [[] for _ in cmds]
            y = np.empty_like(x)
            np.copyto(y, x)
            copies = []
            # The copy is timed in every round, between the binaries' runs: the VM's speed
            # drifts from minute to minute, and a block of copies at the end saw another
            # machine state than the runs (memcpy's median moved 21-31 ms between runs).
            for _ in range(a.rounds):
                for t, c in zip(times, cmds):
                    t.append(timed(c))
                    copies.append(memcpy_once(x, y))
            mc = statistics.median(copies)
            del y
            meds = [statistics.median(t) for t in times]
            print(f"{name:<10} {mc * 1e3:9.1f} " +
                  " ".join(f"{m * 1e3:9.1f} {mc / m:8.2f}" for m in meds))
            os.remove(path)


if __name__ == "__main__":
    main()
