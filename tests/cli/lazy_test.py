#!/usr/bin/python3
"""The libraries the `fpguard` executable loads on first use (src/lazy/library.hpp): which
ones a command loads, read off glibc's loader (LD_DEBUG=files lists every library it
opens), and what a copy of fpguard without its ONNX module does.

- `--version`, `finfo` and `inspect` of a .npy open none of libonnx, libprotobuf,
  libdnnl and libzip; `inspect` of a .npz opens libzip alone; `run` of a model opens the
  ONNX module, libonnx, libprotobuf and libdnnl. Their outputs are those of the library
  linked as usual, which the unit tests and the Python module run.
- Without libfpguard_onnx.so beside it (or in LIBDIR/fpguard), fpguard still inspects a
  .npy; a model or a .pb gives exit 2 and one line naming the module, and no output.

    lazy_test.py --fpguard PATH --source DIR
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest  # noqa: E402
from clitest import check, fails  # noqa: E402

HEAVY = ("libonnx.so", "libonnx_proto.so", "libprotobuf.so", "libdnnl.so", "libzip.so",
         "libfpguard_onnx.so")


def opened(fpguard, *argv):
    """(the run, the heavy libraries the loader opened for it)."""
    env = dict(os.environ, LD_DEBUG="files")
    r = subprocess.run([fpguard, *argv], capture_output=True, text=True, env=env, timeout=300)
    libs = set()
    for ln in r.stderr.splitlines():
        # "file=NAME [0];  needed by ..." (at the start or a dlopen) or "...; dynamically
        # loaded by ..." (dlopen itself): every library the loader opens.
        if "file=" not in ln or ("needed by" not in ln and "dynamically loaded by" not in ln):
            continue
        name = os.path.basename(ln.split("file=", 1)[1].split()[0])
        libs.update(h for h in HEAVY if name.startswith(h))
    return r, libs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    ex = os.path.join(a.source, "examples")
    npy = os.path.join(ex, "tensors", "x.npy")
    npz = os.path.join(ex, "tensors", "grads.npz")
    model = os.path.join(ex, "clean_cnn", "model.onnx")

    for argv, want in ((["--version"], set()),
                       (["finfo", "float16"], set()),
                       (["inspect", npy, "--formats", "float16,bfloat16"], set()),
                       (["inspect", npz, "--formats", "float16"], {"libzip.so"}),
                       (["run", model],
                        {"libfpguard_onnx.so", "libonnx.so", "libonnx_proto.so", "libprotobuf.so",
                         "libdnnl.so"})):
        r, libs = opened(a.fpguard, *argv)
        check(r.returncode == 0, f"{argv[0]} runs", r.stderr[-500:])
        check(libs == want, f"{' '.join(argv[:1])} opens {sorted(want)}", sorted(libs))

    with tempfile.TemporaryDirectory() as tmp:
        lone = shutil.copy(a.fpguard, os.path.join(tmp, "fpguard"))
        r = clitest.run(lone, "inspect", npy, "--formats", "float16")
        check(r.returncode == 0, "without the ONNX module: inspect of a .npy works", r.stderr)
        out = os.path.join(tmp, "out.json")
        fails(lone, "without the ONNX module: a model", ["run", model, "--outputs", out],
              "libfpguard_onnx.so", "cannot load fpguard's ONNX module")
        check(not os.path.exists(out), "without the ONNX module: no output", out)
        pb = os.path.join(tmp, "t.pb")
        with open(pb, "wb") as fh:
            fh.write(b"\x08\x01")
        fails(lone, "without the ONNX module: a .pb", ["inspect", pb], "libfpguard_onnx.so")
    print(f"lazy_test: {len(clitest.failures)} failed")
    sys.exit(1 if clitest.failures else 0)


if __name__ == "__main__":
    main()
