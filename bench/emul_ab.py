#!/usr/bin/python3
"""Whole commands as a user times them (issue 20): `fpguard run` in float32, `fpguard run
--precision P` and `fpguard check --precision P`, for one or more binaries, interleaved:
each round runs every (binary, command) once, so that load drifting on a shared machine
hits every column alike. Prints per binary the median wall seconds, minor page faults and
peak RSS of each command, and the ratios the issue's goals name: the emulated run over the
float32 run (goal: at most 1.2x) and check over the float32 run (goal: at most 3x).

    emul_ab.py --binary before=/path/a --binary after=/path/b [--precision float16]
        [--rounds 5] [--threads 2] [--no-check] MODEL_DIR...

MODEL_DIR holds model.onnx and inputs/ (bench/make_bench_models.py's and
bench/make_real_models.py's layout). Run it at real-time priority (`chrt -f 10`) on a
shared machine."""
import argparse
import os
import statistics
import subprocess
import tempfile
import time


def one_run(argv):
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    start = time.perf_counter()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):  # check's 1: the check failed, which is a result
        raise SystemExit(f"{' '.join(argv)}: exit {code}: {p.stderr.read().decode()}")
    return wall, usage.ru_minflt, usage.ru_maxrss / 1024


def commands(binary, model_dir, precision, threads, out, check):
    model = os.path.join(model_dir, "model.onnx")
    common = ["--inputs", os.path.join(model_dir, "inputs"), "--threads", str(threads)]
    run = [binary, "run", model, *common, "--outputs", out]
    cmds = {"f32": run, "emul": run + ["--precision", precision]}
    if check:
        cmds["check"] = [binary, "check", model, *common, "--precision", precision, "--quiet",
                         "--json", os.path.join(out, "check.json")]
    return cmds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", action="append", required=True, help="NAME=PATH")
    ap.add_argument("--precision", default="float16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    binaries = [b.split("=", 1) for b in a.binary]
    print("load", open("/proc/loadavg").read().strip())
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models:
            res = {}
            for _ in range(a.rounds):
                for name, path in binaries:
                    out = os.path.join(tmp, name)
                    os.makedirs(out, exist_ok=True)
                    for cmd, argv in commands(path, model, a.precision, a.threads, out,
                                              not a.no_check).items():
                        res.setdefault((name, cmd), []).append(one_run(argv))
            print(f"{os.path.basename(os.path.normpath(model))} (median of {a.rounds})")
            for name, _ in binaries:
                med = {cmd: [statistics.median(col) for col in zip(*runs)]
                       for (n, cmd), runs in res.items() if n == name}
                cells = [f"{cmd} {w:.3f} s ({flt:,.0f} faults, {rss:.0f} MB)"
                         for cmd, (w, flt, rss) in med.items()]
                ratios = f"emul/f32 {med['emul'][0] / med['f32'][0]:.2f}"
                if "check" in med:
                    ratios += f", check/f32 {med['check'][0] / med['f32'][0]:.2f}"
                print(f"  {name}: {'; '.join(cells)}; {ratios}")
    print("load", open("/proc/loadavg").read().strip())


if __name__ == "__main__":
    main()
