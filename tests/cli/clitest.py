"""Shared by the end-to-end CLI tests (run_test.py, check_test.py, convert_test.py): the
failure list, running the real binary, the "one line, exit 2" check for bad input,
reading an outputs.json directory back, and the report layer's number policy."""
import json
import math
import os
import subprocess
import sys

import numpy as np

failures = []


def check(cond, what, detail=""):
    if not cond:
        failures.append(f"{what}: {detail}")
        print(f"FAIL {what}: {detail}")


def num(v):
    """The report layer's number policy (src/report/text.cpp)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if abs(v) >= 1e6 or (v != 0 and abs(v) < 1e-3):
        return f"{v:.4g}"
    mag = 0 if v == 0 else math.floor(math.log10(abs(v)))
    s = f"{v:.{max(0, 3 - mag)}f}"
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return "0" if s == "-0" else s


def run(fpguard, *argv, timeout=300):
    return subprocess.run([fpguard, *argv], capture_output=True, text=True, timeout=timeout)


def check_json(fpguard, tmp, model, inputs, *extra):
    """`fpguard check MODEL --inputs INPUTS --json` with `extra`: (the run, the JSON), the
    JSON None when check did not complete (exit 0 or 1)."""
    out = os.path.join(tmp, "check.json")
    if os.path.exists(out):
        os.remove(out)
    r = run(fpguard, "check", model, "--inputs", inputs, "--json", out, "--quiet", *extra)
    check(r.returncode in (0, 1), f"check {model} {extra} runs", r.stderr)
    if r.returncode not in (0, 1):
        return r, None
    with open(out) as fh:
        return r, json.load(fh)


def first_line(r):
    """The first line of a run's stdout (a verdict), "" when it printed nothing."""
    return r.stdout.splitlines()[0] if r.stdout else ""


def fails(fpguard, case, argv, *needles):
    """Bad input: exit 2, exactly one `fpguard: error:` line naming each of `needles`."""
    r = run(fpguard, *argv)
    check(r.returncode == 2, f"{case}: exit 2", (r.returncode, r.stdout[-300:]))
    lines = r.stderr.splitlines()
    check(len(lines) == 1 and lines[0].startswith("fpguard: error: "), f"{case}: one error line",
          repr(r.stderr))
    for n in needles:
        check(n in r.stderr, f"{case}: names {n!r}", repr(r.stderr))


def read_outputs(d):
    """The values of a directory written by --outputs / --dump-all, by name: an array, a
    list of arrays (a sequence) or None (an empty optional)."""
    with open(os.path.join(d, "outputs.json")) as fh:
        j = json.load(fh)
    out = {}
    for t in j["tensors"]:
        kind = t.get("kind", "tensor")
        if kind == "sequence":
            out[t["name"]] = [np.load(os.path.join(d, f)) for f in t["files"]]
        elif kind == "none":
            out[t["name"]] = None
        else:
            out[t["name"]] = np.load(os.path.join(d, t["file"]))
    return out


def finish(label):
    """The exit status of a test script: 1 after printing the failure count, else 0 after
    `label: all checks passed`."""
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print(f"{label}: all checks passed")
    return 0
