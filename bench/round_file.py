#!/usr/bin/python3
"""`fpguard round` on a large .npy against `cp` of the same file (issue 20): the wall time
of each whole command, alternating, the median of each, on a 256 MiB float32 file in a
temporary directory (normal values * 3e4, so some overflow float16). Rows: float32 out
(the input's dtype), `--dtype float16` out (half the bytes written), and the peak memory
(ru_maxrss) of one round.

Usage: bench/round_file.py BUILD_DIR [ROUNDS] [MIB]"""
import os
import statistics
import subprocess
import sys
import tempfile
import time



def timed(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def write_input(path, mib):
    """In a child process: a forked child inherits its parent's peak memory (the mm's
    high-water mark), so this process must never hold the array."""
    code = ("import numpy as np, sys; rng = np.random.default_rng(0); np.save(sys.argv[1], "
            "(rng.standard_normal(int(sys.argv[2]) << 18) * 3e4).astype(np.float32))")
    subprocess.run([sys.executable, "-c", code, path, str(mib)], check=True)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    mib = int(sys.argv[3]) if len(sys.argv) > 3 else 256
    exe = os.path.join(build, "fpguard")
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as tmp:
        src, dst = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
        write_input(src, mib)
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
        p = subprocess.Popen(cmds["round float16"], stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        print(f"peak memory of round: {usage.ru_maxrss / 1024:.0f} MiB (exit {status >> 8})")


if __name__ == "__main__":
    main()
