#!/usr/bin/python3
"""Issue 22's benchmark (docs/scale.md, "Measured scaling"): `fpguard check` of the bench
transformer over SETS input sets in three ways, on this machine's cores:

  1. one process with 2 threads;
  2. mpirun -n 2, one thread per rank (mpirun binds each rank to a core);
  3. check --shard 0/2 and 1/2 side by side (1 thread each), then fpguard merge.

Prints the wall times, the merge time and the peak memory (max RSS) of each process, and
checks that all three give the same verdict and worst cosine. Parallel efficiency of 2
ranks against 1 process at the same total thread count: time(1) / time(2).

    bench/scale_bench.py --fpguard build/fpguard --model build/bench/models/transformer \\
        [--mpirun mpirun] [--sets 32]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np


def make_sets(model_dir, root, count):
    """`count` sets: the model's sample input scaled by a seeded factor in [0.5, 1.5]."""
    inputs = os.path.join(model_dir, "inputs")
    (npy,) = [f for f in os.listdir(inputs) if f.endswith(".npy")]
    base = np.load(os.path.join(inputs, npy))
    rng = np.random.default_rng(22)
    for s in range(count):
        d = os.path.join(root, f"set_{s}")
        os.makedirs(d)
        x = base * rng.uniform(0.5, 1.5) if base.dtype.kind == "f" else base
        np.save(os.path.join(d, npy), x.astype(base.dtype))
    return root


TIME = ["/usr/bin/time", "-f", "peak_kb %M"]


def timed(cmds):
    """Runs the commands side by side: (wall seconds, peak KB of each process)."""
    start = time.monotonic()
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for c in cmds]
    errs = [p.communicate()[1] for p in procs]
    wall = time.monotonic() - start
    for p, e in zip(procs, errs):
        if p.returncode not in (0, 1):
            sys.exit(f"failed ({p.returncode}): {e[-2000:]}")
    peaks = [int(k) for e in errs for k in re.findall(r"peak_kb (\d+)", e)]
    return wall, peaks


def summary(path):
    with open(path) as fh:
        j = json.load(fh)
    return j["verdict"], j["samples"], min(o["cosine"] for o in j["outputs"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    ap.add_argument("--model", required=True, help="a bench model's directory")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--sets", type=int, default=32)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="fpguard_scale_")
    try:
        sets = make_sets(a.model, os.path.join(tmp, "sets"), a.sets)
        model = os.path.join(a.model, "model.onnx")
        check = [a.fpguard, "check", model, "--inputs", sets, "--precision", "float16", "--quiet"]
        out = lambda name: os.path.join(tmp, name)  # noqa: E731
        one, one_peaks = timed([TIME + check + ["--threads", "2", "--json", out("one.json")]])
        mpi, mpi_peaks = timed([[a.mpirun, "--allow-run-as-root", "-n", "2", *TIME, *check,
                                 "--json", out("mpi.json")]])
        shards, shard_peaks = timed(
            [TIME + check + ["--threads", "1", "--shard", f"{i}/2", "--json", out(f"p{i}.json")]
             for i in range(2)])
        merge, merge_peaks = timed([TIME + [a.fpguard, "merge", out("p0.json"), out("p1.json"),
                                            "--json", out("merged.json"), "--quiet"]])
        results = {n: summary(out(n)) for n in ("one.json", "mpi.json", "merged.json")}
        if len(set(results.values())) != 1:
            sys.exit(f"the three ways disagree: {results}")
        mb = lambda ks: " / ".join(f"{k / 1024:.0f}" for k in ks)  # noqa: E731
        print(f"{a.sets} sets of {model}: {results['one.json']}")
        print("| way | wall (s) | peak RSS per process (MB) |")
        print("|---|---|---|")
        print(f"| 1 process x 2 threads | {one:.2f} | {mb(one_peaks)} |")
        print(f"| mpirun -n 2, 1 thread per rank | {mpi:.2f} | {mb(mpi_peaks)} |")
        print(f"| --shard 0/2, 1/2 side by side + merge | {shards:.2f} + {merge:.2f} | "
              f"{mb(shard_peaks)}; merge {mb(merge_peaks)} |")
        print(f"parallel efficiency (2 ranks vs 1 process x 2 threads): {one / mpi:.2f}; "
              f"merge: {100 * merge / shards:.1f}% of the sharded check")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
