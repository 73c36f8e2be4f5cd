#!/usr/bin/python3
"""`fpguard check` over `fpguard run` as a user times the two commands (issue 5): the
wall time of each whole command on the same model and inputs (loading the model and the
inputs, building the executors, running, writing the outputs or the JSON diagnosis),
rounds of (run, then check) back to back, the median of each. The library-level rows of
bench/run (BM_model_run / BM_model_check_fp16) leave loading and writing out of both.

Usage: bench/cli_ratio.py BUILD_DIR [ROUNDS]"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODELS = ["resnet", "transformer", "superres256", "mlp"]


def timed(cmd, ok):
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - t0
    if rc.returncode not in ok:
        sys.exit(f"{' '.join(cmd)}: exit {rc.returncode}: {rc.stderr.strip()}")
    return elapsed


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    exe = os.path.join(build, "fpguard")
    print(f"{'model (commands)':<24} {'run ms':>9} {'check fp16 ms':>14} {'check / run':>12}"
          f"  (median of {rounds} rounds)")
    with tempfile.TemporaryDirectory() as tmp:
        for m in MODELS:
            d = os.path.join(build, "bench", "models", m)
            if not os.path.exists(os.path.join(d, "model.onnx")):
                continue
            model, inputs = os.path.join(d, "model.onnx"), os.path.join(d, "inputs")
            run = [exe, "run", model, "--inputs", inputs, "--outputs", os.path.join(tmp, "out")]
            check = [exe, "check", model, "--precision", "float16", "--inputs", inputs,
                     "--quiet", "--json", os.path.join(tmp, "check.json")]
            timed(run, {0})  # warm the page cache
            rs, cs = [], []
            for _ in range(rounds):
                rs.append(timed(run, {0}))
                cs.append(timed(check, {0, 1}))  # 1: the check failed, a result too
            r, c = statistics.median(rs), statistics.median(cs)
            print(f"{m:<24} {r * 1e3:9.1f} {c * 1e3:14.1f} {c / r:12.2f}")


if __name__ == "__main__":
    main()
