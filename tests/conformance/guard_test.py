#!/usr/bin/python3
"""The conformance guards work: run_conformance.py over a few node tests fails when
  - an op's registration is removed (--pretend-missing-op): its tests are skipped without
    a reason in skipped_ops.txt, and the count passed falls below a floor;
  - an expected failure passes (a temporary expected-failures list naming a passing test);
  - skipped_ops.txt names a key that skips nothing (checked on full runs: here a --data
    folder holding a single test, and a temporary list with one stale key);
and passes on the same tests untouched (so each failure above is the guard's doing).

Usage: guard_test.py --fpguard BUILD/fpguard
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "run_conformance.py")
DATA = "/usr/share/libonnx-testdata/data/node"


def run(fpguard, *extra):
    cmd = [sys.executable, RUNNER, "--fpguard", fpguard, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return r.returncode, r.stdout + r.stderr


def expect(failures, name, rc_out, rc, *needles):
    got_rc, out = rc_out
    missing = [n for n in needles if n not in out]
    if got_rc != rc or missing:
        failures.append(f"{name}: exit {got_rc} (want {rc}); missing {missing}\n{out}")
    else:
        print(f"ok: {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    args = ap.parse_args()
    f = []
    # The two node tests of QLinearMatMul (2D, 3D).
    sel = ["--filter", "test_qlinearmatmul"]
    expect(f, "untouched", run(args.fpguard, *sel, "--floor", "2"), 0, "2 passed, 0 expected")
    expect(f, "op removed", run(args.fpguard, *sel, "--floor", "2",
                                "--pretend-missing-op", "QLinearMatMul"), 1,
           "0 passed", "2 skipped", "skipped for 'QLinearMatMul', which has no reason",
           "below the floor of 2")
    with tempfile.TemporaryDirectory() as tmp:
        listed = os.path.join(tmp, "expected.txt")
        with open(listed, "w") as fh:
            fh.write("test_qlinearmatmul_2D  deliberately listed: it passes\n")
        expect(f, "expected failure passes", run(args.fpguard, *sel, "--expected", listed), 1,
               "test_qlinearmatmul_2D passes but is listed as an expected failure")
        # A full run over a data folder holding one test: a stale skip entry fails it.
        data = os.path.join(tmp, "node")
        os.mkdir(data)
        os.symlink(os.path.join(DATA, "test_qlinearmatmul_2D"),
                   os.path.join(data, "test_qlinearmatmul_2D"))
        empty, skips = os.path.join(tmp, "empty.txt"), os.path.join(tmp, "skips.txt")
        open(empty, "w").close()
        with open(skips, "w") as fh:
            fh.write("Bernoulli  random\n")
        full = ["--data", data, "--expected", empty, "--floor", "1"]
        expect(f, "full run, nothing stale", run(args.fpguard, *full, "--skips", empty), 0,
               "1 passed, 0 expected failures, 0 skipped")
        expect(f, "stale skip entry", run(args.fpguard, *full, "--skips", skips), 1,
               "skipped_ops.txt lists 'Bernoulli', which skips no test")
    for msg in f:
        print(f"FAIL: {msg}")
    return 1 if f else 0


if __name__ == "__main__":
    sys.exit(main())
