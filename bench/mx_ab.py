#!/usr/bin/python3
"""A/B of BM_round_scaled (mxfp8_e4m3, mxfp4_e2m1; 64 MiB, one thread) between fpguard_bench
binaries, alternating them ROUNDS times under `chrt -f 10`. Keeps each row's best real time
per binary and prints it with its ratio to that binary's best memcpy of the same bytes: on a
loaded VM the best of several alternating runs moves less than one run's ratio.

Usage: bench/mx_ab.py ROUNDS BENCH_BINARY... (e.g. build/bench/fpguard_bench)"""
import json
import subprocess
import sys

FILTER = "BM_round_scaled/mxfp(8_e4m3|4_e2m1)/bytes:67108864|BM_memcpy/67108864"


def main():
    rounds, binaries = int(sys.argv[1]), sys.argv[2:]
    best = {b: {} for b in binaries}
    for _ in range(rounds):
        for b in binaries:
            out = subprocess.run(["chrt", "-f", "10", b, f"--benchmark_filter={FILTER}",
                                  "--benchmark_min_time=0.3", "--benchmark_format=json"],
                                 capture_output=True, text=True, check=True).stdout
            for row in json.loads(out)["benchmarks"]:
                best[b][row["name"]] = min(best[b].get(row["name"], 1e30), row["real_time"])
    for b in binaries:
        memcpy = next(v for k, v in best[b].items() if k.startswith("BM_memcpy"))
        rows = [f"{k.split('/')[1]}/{'wide' if 'wide:1' in k else 'typical'} "
                f"{v / 1e6:.1f} ms ({memcpy / v:.2f}x)" for k, v in best[b].items() if "scaled" in k]
        print(f"{b}: memcpy {memcpy / 1e6:.1f} ms; " + "; ".join(rows))


if __name__ == "__main__":
    main()
