"""Shared by the end-to-end CLI tests (run_test.py, check_test.py, convert_test.py): the
failure list, running the real binary, the "one line, exit 2" check for bad input, and
reading an outputs.json directory back."""
import json
import os
import subprocess

import numpy as np

failures = []


def check(cond, what, detail=""):
    if not cond:
        failures.append(f"{what}: {detail}")
        print(f"FAIL {what}: {detail}")


def run(fpguard, *argv, timeout=300):
    return subprocess.run([fpguard, *argv], capture_output=True, text=True, timeout=timeout)


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
