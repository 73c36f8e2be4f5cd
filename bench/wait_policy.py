#!/usr/bin/python3
"""OpenMP's wait policy on the real architectures: the `fpguard` command's default (libgomp's
300,000-iteration spin where the cores are free at its start, else 1000: fpguard/limits.hpp)
against passive waiting (OMP_WAIT_POLICY=passive) and fixed spins (GOMP_SPINCOUNT), idle and
with one core kept busy by a shell loop. Each cell is the median over the rounds of `fpguard
run --warmup 1 --repeat 10 --threads 2`'s median run, in ms (bench/README.md, "Passive waiting
against a bounded spin", "The spin chosen at start").

    wait_policy.py FPGUARD REAL_MODELS_DIR [ROUNDS] [SPINCOUNT...]
"""
import json
import os
import statistics
import subprocess
import sys

MODELS = ["mobilenetv3", "resnet50", "dbnet", "crnn", "bert128"]


def median_ms(fpguard, real, model, env):
    e = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    e.update(env)
    d = os.path.join(real, model)
    out = subprocess.run([fpguard, "run", os.path.join(d, "model.onnx"), "--inputs",
                          os.path.join(d, "inputs"), "--warmup", "1", "--repeat", "10",
                          "--threads", "2", "--json"], env=e, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)["timing"]["median_run_ms"]


def main():
    fpguard, real = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    spins = sys.argv[4:] or ["1000", "10000"]
    settings = [("default", {}), ("passive", {"OMP_WAIT_POLICY": "passive"})] + \
        [(f"spin {s}", {"GOMP_SPINCOUNT": s}) for s in spins]
    for busy in (False, True):
        loop = subprocess.Popen(["sh", "-c", "while :; do :; done"]) if busy else None
        try:
            print("== one core busy" if busy else "== idle", "load",
                  open("/proc/loadavg").read().split()[0], flush=True)
            times = {(m, s): [] for m in MODELS for s, _ in settings}
            for _ in range(rounds):
                for m in MODELS:
                    for s, env in settings:
                        times[(m, s)].append(median_ms(fpguard, real, m, env))
            for m in MODELS:
                print(m.ljust(12), "  ".join(f"{s}: {statistics.median(times[(m, s)]):.1f}"
                                             for s, _ in settings), flush=True)
        finally:
            if loop:
                loop.kill()


if __name__ == "__main__":
    main()
