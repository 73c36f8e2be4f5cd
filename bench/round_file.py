#!/usr/bin/python3
"""`fpguard round` on a large .npy against `cp` of the same file (issue 20): the wall time
of each whole command, alternating, the median of each, on a 256 MiB float32 file in a
temporary directory (normal values * 3e4, so some overflow float16). Rows: float32 out
(the input's dtype), `--dtype float16` out (half the bytes written), and the peak memory
(ru_maxrss) of one round.

Usage: bench/round_file.py BUILD_DIR [ROUNDS] [MIB]"""
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def timed(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    mib = int(sys.argv[3]) if len(sys.argv) > 3 else 256
    exe = os.path.join(build, "fpguard")
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as tmp:
        src, dst = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
        rng = np.random.default_rng(0)
        np.save(src, (rng.standard_normal(mib << 18) * 3e4).astype(np.float32))
        cmds = {"cp": ["cp", src, dst],
                "round float16": [exe, "round", "float16", src, "-o", dst],
                "round float16 --dtype float16": [exe, "round", "float16", src, "-o", dst,
                                                  "--dtype", "float16"]}
        for c in cmds.values():
            timed(c)  # warm the page cache
        times = {k: [] for k in cmds}
        for _ in range(rounds):
            for k, c in cmds.items():
                times[k].append(timed(c))
        cp = statistics.median(times["cp"])
        print(f"{'command (' + str(mib) + ' MiB float32)':<34} {'median s':>9} {'x cp':>6}"
              f"  (median of {rounds} rounds)")
        for k, v in times.items():
            print(f"{k:<34} {statistics.median(v):9.3f} {statistics.median(v) / cp:6.2f}")
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        subprocess.run(cmds["round float16"], check=True, stdout=subprocess.DEVNULL)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        print(f"peak memory of round: {peak / 1024:.0f} MiB"
              + (" (or less: an earlier child peaked higher)" if peak == before else ""))


if __name__ == "__main__":
    main()
