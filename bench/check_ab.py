#!/usr/bin/python3
"""A/B of `fpguard check` in several precisions, back to back: for each model, each
repeat runs every (binary, precision) once, interleaved, so that load drifting on a
shared machine hits every column alike. Prints the median wall and CPU (user + system,
all threads) seconds of each, and each binary's ratio of a precision to the first one.

    check_ab.py --binary before=/path/a --binary after=/path/b \\
        --precisions float16,mxfp8_e4m3 --repeats 5 [--threads T] MODEL_DIR...

MODEL_DIR holds model.onnx and inputs/ (bench/make_bench_models.py's layout); each run is
`fpguard check MODEL_DIR/model.onnx --inputs MODEL_DIR/inputs --precision P --quiet`
(with `--threads T` when given).
"""
import argparse
import os
import statistics
import subprocess
import time


def one_run(binary, model_dir, precision, threads):
    argv = [binary, "check", os.path.join(model_dir, "model.onnx"), "--inputs",
            os.path.join(model_dir, "inputs"), "--precision", precision, "--quiet"]
    if threads:
        argv += ["--threads", str(threads)]
    start = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):  # 1: the check failed, which is a result
        raise SystemExit(f"{' '.join(argv)}: exit {code}: {p.stderr.read().decode()}")
    return wall, usage.ru_utime + usage.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", action="append", required=True, help="NAME=PATH")
    ap.add_argument("--precisions", default="float16,mxfp8_e4m3")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="check's --threads (0: its default)")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    binaries = [b.split("=", 1) for b in a.binary]
    precisions = a.precisions.split(",")
    for model in a.models:
        times = {(b, p): [] for b, _ in binaries for p in precisions}
        for _ in range(a.repeats):
            for name, path in binaries:
                for p in precisions:
                    times[(name, p)].append(one_run(path, model, p, a.threads))
        print(f"{os.path.basename(os.path.normpath(model))} (median of {a.repeats})")
        for name, _ in binaries:
            wall = {p: statistics.median(w for w, _ in times[(name, p)]) for p in precisions}
            cpu = {p: statistics.median(c for _, c in times[(name, p)]) for p in precisions}
            cells = [f"{p} {wall[p]:.3f} s wall {cpu[p]:.3f} s CPU" for p in precisions]
            ratios = [f"{p}/{precisions[0]} {wall[p] / wall[precisions[0]]:.2f} wall "
                      f"{cpu[p] / cpu[precisions[0]]:.2f} CPU" for p in precisions[1:]]
            print(f"  {name}: " + "; ".join(cells + ratios))


if __name__ == "__main__":
    main()
