#!/usr/bin/python3
"""Issue 22's benchmark (docs/scale.md, "Measured scaling"): `fpguard check` of the bench
transformer over SETS input sets in three ways, on this machine's cores:

  1. one process with 2 threads;
  2. mpirun -n 2, one thread per rank (mpirun binds each rank to a core);
  3. check --shard 0/2 and 1/2 side by side (1 thread each), then fpguard merge.

Prints the wall times, the merge time and the peak memory (max RSS) of each process, and
checks that all three give the same verdict and worst cosine. Parallel efficiency of 2
ranks against 1 process at the same total thread count: time(1) / time(2).

With --before OLD (another fpguard, e.g. main's at a branch point), OLD's shards are
checked too, and the two merges, each of its own parts, run alternately --repeats times
(A/B in one run): their median wall and CPU (user + sys) times. --shards-only skips ways 1
and 2.

    bench/scale_bench.py --fpguard build/fpguard --model build/bench/models/transformer \\
        [--mpirun mpirun] [--sets 32] [--before OLD [--repeats 7]] [--shards-only]
"""
import argparse
import json
import os
import re
import shutil
import statistics
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


TIME = ["/usr/bin/time", "-f", "peak_kb %M cpu %U %S"]


def timed(cmds, cpu=None):
    """Runs the commands side by side: (wall seconds, peak KB of each process); with a
    list `cpu`, appends their CPU seconds (user + sys) to it."""
    start = time.monotonic()
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for c in cmds]
    errs = [p.communicate()[1] for p in procs]
    wall = time.monotonic() - start
    for p, e in zip(procs, errs):
        if p.returncode not in (0, 1):
            sys.exit(f"failed ({p.returncode}): {e[-2000:]}")
    peaks = [int(k) for e in errs for k in re.findall(r"peak_kb (\d+)", e)]
    if cpu is not None:
        cpu.append(sum(float(u) + float(s) for e in errs
                       for u, s in re.findall(r"cpu ([\d.]+) ([\d.]+)", e)))
    return wall, peaks


def merge_ab(fpguards, out, repeats):
    """The merges of each fpguard's own parts, alternating: median (wall, CPU) of each."""
    times = {f: ([], []) for f in fpguards}
    for _ in range(repeats):
        for k, f in enumerate(fpguards):
            wall, _ = timed([TIME + [f, "merge", out(f"p0_{k}.json"), out(f"p1_{k}.json"),
                                     "--json", out(f"merged_{k}.json"), "--quiet"]],
                            times[f][1])
            times[f][0].append(wall)
    return {f: (statistics.median(w), statistics.median(c)) for f, (w, c) in times.items()}


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
    ap.add_argument("--before", help="another fpguard, for an A/B of merge")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--shards-only", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="fpguard_scale_")
    try:
        sets = make_sets(a.model, os.path.join(tmp, "sets"), a.sets)
        model = os.path.join(a.model, "model.onnx")
        out = lambda name: os.path.join(tmp, name)  # noqa: E731
        check_of = lambda f: [f, "check", model, "--inputs", sets,  # noqa: E731
                              "--precision", "float16", "--quiet"]
        check = check_of(a.fpguard)
        mb = lambda ks: " / ".join(f"{k / 1024:.0f}" for k in ks)  # noqa: E731
        print("| way | wall (s) | peak RSS per process (MB) |")
        print("|---|---|---|")
        results = {}
        if not a.shards_only:
            one, one_peaks = timed([TIME + check + ["--threads", "2", "--json", out("one.json")]])
            mpi, mpi_peaks = timed([[a.mpirun, "--allow-run-as-root", "-n", "2", *TIME, *check,
                                     "--json", out("mpi.json")]])
            results = {n: summary(out(n)) for n in ("one.json", "mpi.json")}
            print(f"| 1 process x 2 threads | {one:.2f} | {mb(one_peaks)} |")
            print(f"| mpirun -n 2, 1 thread per rank | {mpi:.2f} | {mb(mpi_peaks)} |")
        fpguards = [a.fpguard] + ([a.before] if a.before else [])
        shard_cpu = []
        for k, f in enumerate(fpguards):
            shards, shard_peaks = timed(
                [TIME + check_of(f) + ["--threads", "1", "--shard", f"{i}/2", "--json",
                                       out(f"p{i}_{k}.json")] for i in range(2)], shard_cpu)
            merge, merge_peaks = timed([TIME + [f, "merge", out(f"p0_{k}.json"),
                                                out(f"p1_{k}.json"), "--json",
                                                out(f"merged_{k}.json"), "--quiet"]])
            results[f"merged_{k}.json"] = summary(out(f"merged_{k}.json"))
            print(f"| {f}: --shard 0/2, 1/2 side by side + merge | {shards:.2f} + {merge:.2f} "
                  f"| {mb(shard_peaks)}; merge {mb(merge_peaks)} |")
            if k == 0:
                sharded = shards
        if len(set(results.values())) != 1:
            sys.exit(f"the ways disagree: {results}")
        print(f"{a.sets} sets of {model}: {next(iter(results.values()))}")
        if not a.shards_only:
            print(f"parallel efficiency (2 ranks vs 1 process x 2 threads): {one / mpi:.2f}")
        for f, (wall, cpu) in merge_ab(fpguards, out, a.repeats).items():
            print(f"merge ({f}; median of {a.repeats}): {wall:.3f} s wall, {cpu:.3f} s CPU; "
                  f"{100 * wall / sharded:.1f}% of the sharded check's wall time, "
                  f"{100 * cpu / shard_cpu[0]:.1f}% of its CPU time")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
