#!/usr/bin/python3
"""Ctrl-C (SIGINT), SIGTERM and SIGHUP during `fpguard round` leave no partial output.

    interrupt_test.py --fpguard PATH

1. At the write, deterministically: FPGUARD_TEST_WRITE_DELAY_MS (a test hook of
   write_file_atomic) holds the finished temporary file before the rename; the signal
   is sent once the temporary file exists. The process must die of that signal and
   leave only its input.
2. Mid-write: a 64 MiB input, the signal as soon as the temporary file appears. Whatever
   the timing, the process either died and left nothing, or finished with a complete
   output; never a partial or temporary file.
3. Before any write (while reading and rounding): nothing is left.
4. A SIGINT the caller ignores (nohup, a background job) stays ignored: the run
   completes with a complete output.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def defaults():
    # A background job inherits SIGINT ignored; start every case from the defaults.
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


def ignore_sigint():
    defaults()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def start(fpguard, tmp, delay_ms=None, preexec=defaults):
    env = dict(os.environ)
    env.pop("FPGUARD_TEST_WRITE_DELAY_MS", None)
    if delay_ms is not None:
        env["FPGUARD_TEST_WRITE_DELAY_MS"] = str(delay_ms)
    return subprocess.Popen([fpguard, "round", "float16", "in.npy", "-o", "result.npy"],
                            cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=preexec)


def temporaries(tmp):
    return [f for f in os.listdir(tmp) if f.startswith(".result.npy.tmp")]


def wait_for_temporary(p, tmp, seconds=120):
    end = time.monotonic() + seconds
    while time.monotonic() < end and p.poll() is None:
        if temporaries(tmp):
            return True
        time.sleep(0.001)
    return False


def finish(p, seconds=60):
    try:
        out, err = p.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return None, out, err
    return p.returncode, out, err


def complete(tmp, x):
    try:
        y = np.load(os.path.join(tmp, "result.npy"))
    except Exception:  # noqa: BLE001
        return False
    return y.shape == x.shape and np.array_equal(y, x.astype(np.float16).astype(np.float32))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--fpguard", required=True)
    fpguard = os.path.abspath(p.parse_args().fpguard)
    rng = np.random.default_rng(3)
    with tempfile.TemporaryDirectory(prefix="fpguard_interrupt_") as tmp:
        small = rng.standard_normal(1000).astype(np.float32)
        np.save(os.path.join(tmp, "in.npy"), small)

        # 1. at the write, deterministically
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            name = signal.Signals(sig).name
            proc = start(fpguard, tmp, delay_ms=60000)
            seen = wait_for_temporary(proc, tmp)
            check(seen, f"{name}: the temporary file appears during the write")
            proc.send_signal(sig)
            rc, _, err = finish(proc, 30)
            check(rc == -sig, f"{name}: fpguard dies of the signal (status {rc}, {err!r})")
            check(os.listdir(tmp) == ["in.npy"],
                  f"{name}: nothing but the input is left ({sorted(os.listdir(tmp))})")

        # 4. an ignored SIGINT stays ignored
        proc = start(fpguard, tmp, delay_ms=1500, preexec=ignore_sigint)
        check(wait_for_temporary(proc, tmp), "ignored SIGINT: the temporary file appears")
        proc.send_signal(signal.SIGINT)
        rc, _, err = finish(proc, 60)
        check(rc == 0, f"ignored SIGINT: the run completes (status {rc}, {err!r})")
        check(complete(tmp, small), "ignored SIGINT: the output is complete")
        check(not temporaries(tmp), "ignored SIGINT: no temporary file")
        os.remove(os.path.join(tmp, "result.npy"))

        # 2. mid-write, and 3. before the write, on a large input
        large = rng.standard_normal(16 << 20).astype(np.float32)  # 64 MiB
        np.save(os.path.join(tmp, "in.npy"), large)
        outcomes = []
        for when in ("mid-write", "before the write"):
            proc = start(fpguard, tmp)
            if when == "mid-write":
                wait_for_temporary(proc, tmp)
            else:
                time.sleep(0.02)
            proc.send_signal(signal.SIGINT)
            rc, _, err = finish(proc, 120)
            left = sorted(os.listdir(tmp))
            if rc == -signal.SIGINT:
                check(left == ["in.npy"], f"SIGINT {when}: died, and left nothing ({left})")
                outcomes.append(f"{when}: interrupted")
            else:
                check(rc == 0 and left == ["in.npy", "result.npy"] and complete(tmp, large),
                      f"SIGINT {when}: finished first, with a complete output (status {rc}, "
                      f"{left}, {err!r})")
                outcomes.append(f"{when}: finished before the signal")
                os.remove(os.path.join(tmp, "result.npy"))
        print("interrupt_test: " + "; ".join(outcomes))
    print(f"interrupt_test: {len(FAILURES)} failed")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
