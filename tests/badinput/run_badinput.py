#!/usr/bin/python3
"""The bad-input suite: every case of cases.txt through the real fpguard binary.

    run_badinput.py --fpguard PATH [--no-rlimit] [--timeout S] [--memory-mb M]

Each line of cases.txt is `ARGS ==> EXPECTED`: the fpguard arguments (split as a shell
would, with {dir} for the directory of inputs and {out} for an output path) and the one
line fpguard must print on stderr. The inputs are the committed files of files/
(written by make_badinput.py), copied to a temporary directory; every case runs there
under a wall-clock limit (10 s) and an address-space limit (RLIMIT_AS, 2 GiB; off for
sanitizer builds, whose shadow memory needs more) and must:
  - exit with status 2, print nothing on stdout and exactly the expected line on stderr;
  - leave no output, no temporary file, and every input byte-identical.
A few inputs that are unusual but valid (big-endian data) are checked to succeed.
"""
import argparse
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_cases(path):
    cases = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if " ==> " not in line:
                sys.exit(f"{path}:{lineno}: expected 'ARGS ==> EXPECTED'")
            args, expected = line.split(" ==> ", 1)
            cases.append((lineno, shlex.split(args), expected))
    return cases


def snapshot(root):
    """Every file and link under root: relative path -> bytes or link target."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    out[rel] = ("file", f.read())
            else:
                out[rel] = ("dir", None)
    return out


class Runner:
    def __init__(self, args):
        self.fpguard = os.path.abspath(args.fpguard)
        self.timeout = args.timeout
        self.memory = None if args.no_rlimit else args.memory_mb << 20
        self.root = tempfile.mkdtemp(prefix="fpguard_badinput_")
        self.inputs = os.path.join(self.root, "in")
        self.outputs = os.path.join(self.root, "out")
        self.reset()
        self.pristine = snapshot(self.inputs)
        self.failures = 0
        self.passed = 0

    def reset(self):
        shutil.rmtree(self.inputs, ignore_errors=True)
        shutil.rmtree(self.outputs, ignore_errors=True)
        shutil.copytree(os.path.join(HERE, "files"), self.inputs, symlinks=True)
        os.mkdir(self.outputs)

    def limit(self):
        if self.memory:
            resource.setrlimit(resource.RLIMIT_AS, (self.memory, self.memory))

    def run(self, argv):
        env = dict(os.environ, MALLOC_ARENA_MAX="2", NO_COLOR="1")
        start = time.monotonic()
        try:
            r = subprocess.run([self.fpguard, *argv], cwd=self.root, capture_output=True,
                               timeout=self.timeout, preexec_fn=self.limit, env=env)
        except subprocess.TimeoutExpired:
            return None, time.monotonic() - start
        return r, time.monotonic() - start

    def fail(self, name, message):
        self.failures += 1
        print(f"FAIL {name}: {message}", flush=True)

    def case(self, name, argv, expected):
        sub = {"{dir}": "in", "{out}": "out/result.npy"}
        argv = [a.replace("{dir}", sub["{dir}"]).replace("{out}", sub["{out}"]) for a in argv]
        expected = expected.replace("{dir}", sub["{dir}"]).replace("{out}", sub["{out}"])
        r, seconds = self.run(argv)
        problems = []
        if r is None:
            problems.append(f"no answer within {self.timeout} s")
        else:
            stderr = r.stderr.decode("utf-8", "replace")
            if r.returncode != 2:
                problems.append(f"exit status {r.returncode}, expected 2")
            if stderr != expected + "\n":
                problems.append(f"stderr {stderr!r}\n     expected {expected + chr(10)!r}")
            if r.stdout:
                problems.append(f"stdout not empty: {r.stdout[:200]!r}")
        left = os.listdir(self.outputs)
        if left:
            problems.append(f"left output files: {left}")
        if snapshot(self.inputs) != self.pristine:
            problems.append("an input file was changed, added or removed")
        if problems or left:
            self.reset()
        if problems:
            self.fail(name, "\n   ".join([shlex.join(argv)] + problems))
        else:
            self.passed += 1

    def succeeds(self, name, argv, check):
        argv = [a.replace("{dir}", "in").replace("{out}", "out/result.npy") for a in argv]
        r, _ = self.run(argv)
        if r is None or r.returncode != 0:
            self.fail(name, f"{shlex.join(argv)}: {r and r.returncode}: {r and r.stderr!r}")
        else:
            try:
                check(os.path.join(self.outputs, "result.npy"), r.stdout.decode())
                self.passed += 1
            except AssertionError as e:
                self.fail(name, str(e))
        shutil.rmtree(self.outputs)
        os.mkdir(self.outputs)


def check_big_endian(out, stdout):
    import numpy as np
    x = np.load(os.path.join(HERE, "files", "npy", "big_endian.npy"))
    y = np.load(out)
    assert x.dtype == np.dtype(">f8"), x.dtype
    assert y.dtype == np.dtype("<f8") and y.tolist() == x.astype(np.float16).astype("<f8").tolist(), \
        f"big-endian input: {x} -> {y}"


def check_within_limit(out, stdout):
    assert "3 float32 values rounded to float16" in stdout, stdout


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--fpguard", required=True)
    p.add_argument("--cases", default=os.path.join(HERE, "cases.txt"))
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--memory-mb", type=int, default=2048)
    p.add_argument("--no-rlimit", action="store_true",
                   help="no address-space limit (ASan reserves terabytes of shadow memory)")
    args = p.parse_args()
    cases = parse_cases(args.cases)
    r = Runner(args)
    try:
        for lineno, argv, expected in cases:
            r.case(f"cases.txt:{lineno}", argv, expected)
        r.succeeds("big-endian .npy is converted",
                   ["round", "float16", "{dir}/npy/big_endian.npy", "-o", "{out}"], check_big_endian)
        r.succeeds("a tensor within --max-memory is read",
                   ["--max-memory", "12", "round", "float16", "{dir}/npy/good.npy", "-o", "{out}"],
                   check_within_limit)
    finally:
        shutil.rmtree(r.root, ignore_errors=True)
    print(f"run_badinput: {len(cases)} bad inputs; {r.passed} checks passed, {r.failures} failed",
          flush=True)
    sys.exit(1 if r.failures else 0)


if __name__ == "__main__":
    main()
