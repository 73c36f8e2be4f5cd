"""The Python module against its peers (issue 19's Performance section), one thread, on
64 MiB of float32 N(0,1) data:
  round:    fpguard.round(x, "float16", out=y) vs torch.from_numpy(x).half() and
            x.astype(np.float16) (both make the float16 array fpguard's out= holds as float32
            values: the conversion itself, which is what each costs a user);
  stats:    fpguard.stats(x, formats=[float16, bfloat16, float8_e4m3fn]) vs NumPy counting
            the same (bench/numpy_stats.py, the C++ benchmark's NumPy peer);
  overhead: one fpguard.round call on 16 elements (out= given), wall and CPU time, and one
            fpguard.stats call.
The process is pinned to one CPU first (fpguard's automatic thread count is the CPUs it may
run on) and torch.set_num_threads(1). Best of `repeats` runs each; prints one JSON object.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/python_bench.py [repeats]"""
import json
import os
import sys
import time
import timeit

os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

import numpy as np  # noqa: E402
import torch  # noqa: E402

import fpguard  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from numpy_stats import numpy_stats  # noqa: E402

torch.set_num_threads(1)
N = (64 << 20) // 4
FORMATS = ["float16", "bfloat16", "float8_e4m3fn"]


def best(f, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def per_call(f, calls=20000, timer=time.perf_counter):
    """Median over 5 batches of the time of one call, in microseconds. With
    timer=time.process_time: the CPU time of one call, which other processes on the same
    CPU do not inflate as they do the wall time (a loaded machine)."""
    batches = sorted(timeit.repeat(f, number=calls, repeat=5, timer=timer))
    return batches[2] / calls * 1e6


def main():
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    x = np.random.default_rng(42).standard_normal(N, dtype=np.float32)
    y = np.empty_like(x)
    t = torch.from_numpy(x)
    r = {
        "round_fpguard_s": best(lambda: fpguard.round(x, "float16", out=y), repeats),
        "round_torch_half_s": best(lambda: t.half(), repeats),
        "round_numpy_astype_s": best(lambda: x.astype(np.float16), repeats),
        "stats_fpguard_s": best(lambda: fpguard.stats(x, formats=FORMATS, threads=1), repeats),
        "stats_numpy_s": best(lambda: numpy_stats(x), repeats),
    }
    small, small_out = x[:16].copy(), np.empty(16, np.float32)
    r["round_16_us"] = per_call(lambda: fpguard.round(small, "float16", out=small_out))
    r["round_16_cpu_us"] = per_call(lambda: fpguard.round(small, "float16", out=small_out),
                                    timer=time.process_time)
    r["stats_16_us"] = per_call(lambda: fpguard.stats(small, formats=FORMATS, threads=1), 2000)
    r["vs_torch_half"] = r["round_torch_half_s"] / r["round_fpguard_s"]
    r["vs_numpy_astype"] = r["round_numpy_astype_s"] / r["round_fpguard_s"]
    r["stats_vs_numpy"] = r["stats_numpy_s"] / r["stats_fpguard_s"]
    r["load_average"] = os.getloadavg()
    print(json.dumps(r, indent=1))


if __name__ == "__main__":
    main()
