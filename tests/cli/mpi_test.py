#!/usr/bin/python3
"""check and plan under mpirun (docs/scale.md): `mpirun -n 2` and `-n 3` on 12 generated
input sets of the examples give the JSON one process over all 12 sets gives, every field
(shard_test's comparison: counts, strings and booleans exactly, numbers to 1e-12 relative):
superres in float16 on 2 ranks (fails, an overflow origin), clean_cnn on 3 (passes), and a
MatMul whose products cancel on 2 (an accuracy origin, measured on set 0 on rank 0).
`plan` under -n 2 writes the plan one process writes. A corrupt set on rank 1 ends the job
within 30 s with exit 2, that rank's one error line, naming the set, once, and no output
file; so does a real allocation failure on rank 1 (its memory limited by a wrapper script
given to mpirun); --shard is refused likewise. --progress draws rank 0's bar alone, counting every
rank's sets. Without its MPI module (libfpguard_mpi.so) fpguard runs alone but refuses
mpirun with exit 2. Generated sets (--samples 12) spread over 2 ranks, and
scaled precisions (mxfp8_e4m3; fp8, its activation amax calibrated over all ranks' sets)
equal one process too.

    mpi_test.py --fpguard PATH --examples DIR --mpirun MPIRUN
    mpi_test.py --no-mpi        (a build without MPI: reports the skip, exit 77)
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import check, finish, run  # noqa: E402
from shard_test import SETS, cancelling_matmul, load, make_sets, same  # noqa: E402

SKIP = 77


def rank_env():
    """The ranks' environment: in the sanitizer build (ASAN_OPTIONS set), OpenMPI's own
    leaks suppressed (lsan-openmpi.supp says why and how narrowly)."""
    env = dict(os.environ)
    if "ASAN_OPTIONS" in env:
        supp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lsan-openmpi.supp")
        env["ASAN_OPTIONS"] += ":fast_unwind_on_malloc=0:malloc_context_size=64"
        env["LSAN_OPTIONS"] = ":".join(
            x for x in (env.get("LSAN_OPTIONS", ""), f"suppressions={supp}") if x)
    return env


def mpirun(a, n, *argv, timeout=120):
    """`fpguard ARGV` on n ranks of this machine (as root too, more ranks than cores)."""
    cmd = [a.mpirun, "--allow-run-as-root", "--oversubscribe", "-n", str(n), a.fpguard, *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=rank_env())


def agree(a, tmp, model, sets, tag, extra, want_verdict, ranks=(2, 3)):
    """check over all sets in one process == the same check on `ranks` ranks (`sets`: a
    directory, or None with --samples in `extra`)."""
    if sets:
        extra = ["--inputs", sets, *extra]
    whole = os.path.join(tmp, tag + "_one.json")
    r = run(a.fpguard, "check", model, "--json", whole, "--quiet", *extra)
    check(r.returncode in (0, 1), f"{tag}: check runs", r.stderr)
    want = load(whole)
    if want_verdict:
        check(want["verdict"] == want_verdict, f"{tag}: verdict", want["verdict"])
    check(want["samples"] == SETS, f"{tag}: all sets checked", want["samples"])
    for n in ranks:
        out = os.path.join(tmp, f"{tag}_{n}.json")
        m = mpirun(a, n, "check", model, "--json", out, "--quiet", *extra)
        check(m.returncode == r.returncode, f"{tag}: -n {n} exits as one process does",
              (m.returncode, r.returncode, m.stderr[-2000:]))
        check(m.stdout == r.stdout, f"{tag}: -n {n} prints what one process prints (rank 0 only)",
              (m.stdout[-1500:], r.stdout[-1500:]))
        if os.path.exists(out):
            diff = same(want, load(out))
            check(not diff, f"{tag}: -n {n} equals one process over all sets", diff)
        else:
            check(False, f"{tag}: -n {n} writes --json", m.stderr[-2000:])
    return want


def plan(a, tmp, example):
    model = os.path.join(example, "model.onnx")
    sets = os.path.join(tmp, "sr_sets")
    one, two = os.path.join(tmp, "plan_one.json"), os.path.join(tmp, "plan_2.json")
    r = run(a.fpguard, "plan", model, "--precision", "float16", "--inputs", sets, "-o", one,
            "--quiet")
    check(r.returncode in (0, 1), "plan runs", r.stderr)
    m = mpirun(a, 2, "plan", model, "--precision", "float16", "--inputs", sets, "-o", two,
               "--quiet")
    check(m.returncode == r.returncode, "plan -n 2 exits as one process does",
          (m.returncode, r.returncode, m.stderr[-2000:]))
    check(m.stdout.replace(two, one) == r.stdout, "plan -n 2 prints what one process prints",
          (m.stdout[-1500:], r.stdout[-1500:]))
    if os.path.exists(one) and os.path.exists(two):
        want = load(one)
        check(want["passes"] > 1, "plan: several passes (checks) to agree on", want["passes"])
        diff = same(want, load(two))
        check(not diff, "plan -n 2 equals the one-process plan", diff)
    else:
        check(False, "plan -n 2 writes the plan", m.stderr[-2000:])


def corrupt(a, tmp, example):
    """Set 4 (rank 1 of 3: 4 mod 3) is not a TensorProto: the job ends, exit 2, in time."""
    model = os.path.join(example, "model.onnx")
    sets = os.path.join(tmp, "bad_sets")
    shutil.copytree(os.path.join(tmp, "sr_sets"), sets)
    bad = os.path.join(sets, "test_data_set_4", "input_0.pb")
    with open(bad, "wb") as fh:
        fh.write(b"\xff\x13 not a tensor \x00" * 8)
    for cmd in (["check", model, "--precision", "float16", "--inputs", sets],
                ["plan", model, "--precision", "float16", "--inputs", sets]):
        out = os.path.join(tmp, "bad.json")
        flag = "--json" if cmd[0] == "check" else "-o"
        start = time.monotonic()
        try:
            m = mpirun(a, 3, *cmd, flag, out, "--quiet", timeout=30)
        except subprocess.TimeoutExpired:
            check(False, f"{cmd[0]}: a corrupt set ends the job within 30 s", "timed out")
            continue
        took = time.monotonic() - start
        check(m.returncode == 2, f"{cmd[0]}: a corrupt set: exit 2", (m.returncode, m.stderr))
        ours = [ln for ln in m.stderr.splitlines() if ln.startswith("fpguard: ")]
        check(len(ours) == 1 and ours[0].startswith("fpguard: error: "),
              f"{cmd[0]}: one error line", m.stderr)
        check("test_data_set_4" in m.stderr, f"{cmd[0]}: the error names the set", m.stderr)
        check(m.stdout == "", f"{cmd[0]}: nothing on stdout", m.stdout)
        check(not os.path.exists(out), f"{cmd[0]}: no output file", out)
        check(took < 30, f"{cmd[0]}: within 30 s", took)


# Rank 1's wrapper: its data segment (heap and private memory, RLIMIT_DATA) limited to 64
# MiB, so that allocating its set fails. Rank 0 runs unlimited.
LIMIT_RANK_1 = """#!/bin/sh
if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then
  ulimit -d 65536
fi
exec "$@"
"""


def sanitized(fpguard):
    """Whether the binary is built with AddressSanitizer (scripts/test-sanitize: gcc links
    libasan.so)."""
    r = subprocess.run(["ldd", fpguard], capture_output=True, text=True)
    return "libasan" in r.stdout


def out_of_memory(a, tmp):
    """A real allocation failure on one rank: x * 2 over set 0 of 4 x 1024 values and set 1
    (rank 1's) of 32768 x 1024 (128 MiB), rank 1 limited to 64 MiB: the job ends within
    30 s, exit 2, one error line naming the rank, no output file."""
    if sanitized(a.fpguard):
        # ASan's shadow memory cannot live under a data limit, and its operator new aborts
        # on a failed allocation by design (allocator_may_return_null covers malloc only):
        # a real allocation failure cannot reach fpguard's handler in that build.
        print("cli.mpi: the out-of-memory case is not run under AddressSanitizer (its "
              "operator new aborts on failure by design)")
        return
    root = os.path.join(tmp, "oom")
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["y"], name="double")], "oom",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 1024])],
        [numpy_helper.from_array(np.array(2, np.float32), "two")])
    rng = np.random.default_rng(22)
    for s, n in ((0, 4), (1, 32768)):
        os.makedirs(os.path.join(root, "sets", f"set_{s}"))
        np.save(os.path.join(root, "sets", f"set_{s}", "x.npy"),
                rng.standard_normal((n, 1024), dtype=np.float32))
    model = os.path.join(root, "model.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), model)
    wrapper = os.path.join(root, "limit_rank_1.sh")
    with open(wrapper, "w") as fh:
        fh.write(LIMIT_RANK_1)
    os.chmod(wrapper, 0o755)
    out = os.path.join(root, "oom.json")
    cmd = [a.mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "2", wrapper, a.fpguard,
           "check", model, "--inputs", os.path.join(root, "sets"), "--precision", "float16",
           "--json", out, "--quiet"]
    start = time.monotonic()
    try:
        m = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=rank_env())
    except subprocess.TimeoutExpired:
        check(False, "out of memory on rank 1 ends the job within 30 s", "timed out")
        return
    took = time.monotonic() - start
    check(m.returncode == 2, "out of memory on rank 1: exit 2", (m.returncode, m.stderr))
    ours = [ln for ln in m.stderr.splitlines() if ln.startswith("fpguard: ")]
    check(ours == ["fpguard: error: rank 1: out of memory"],
          "out of memory on rank 1: one error line naming the rank", m.stderr)
    check(m.stdout == "", "out of memory on rank 1: nothing on stdout", m.stdout)
    check(not os.path.exists(out), "out of memory on rank 1: no output file", out)
    check(took < 30, "out of memory on rank 1: within 30 s", took)


def refused(a, tmp, example):
    """--shard is refused on every rank alike."""
    model = os.path.join(example, "model.onnx")
    out = os.path.join(tmp, "refused.json")
    for case, extra, needle in (
            ("--shard", ["--inputs", os.path.join(tmp, "sr_sets"), "--shard", "0/2"],
             "under mpirun the ranks are the shards"),):
        m = mpirun(a, 2, "check", model, "--precision", "float16", "--json", out, *extra,
                   timeout=30)
        ours = [ln for ln in m.stderr.splitlines() if ln.startswith("fpguard: ")]
        check(m.returncode == 2 and len(ours) == 1 and needle in ours[0],
              f"{case}: exit 2, one line", (m.returncode, m.stderr))
    check(not os.path.exists(out), "refusals leave no output", out)


def module_missing(a, tmp, example):
    """fpguard copied without its MPI module (libfpguard_mpi.so, which it loads only under
    mpirun): a plain run still works; under mpirun every rank exits 2 with one line naming
    the module, and writes nothing."""
    lone = os.path.join(tmp, "lone")
    os.makedirs(lone)
    binary = shutil.copy(a.fpguard, os.path.join(lone, "fpguard"))
    # (with its ONNX module, which reads the model, where the build made one:
    # src/lazy/library.hpp)
    onnx_module = os.path.join(os.path.dirname(a.fpguard), "libfpguard_onnx.so")
    if os.path.isfile(onnx_module):
        shutil.copy(onnx_module, lone)
    model = os.path.join(example, "model.onnx")
    plain = subprocess.run([binary, "run", model], capture_output=True, text=True)
    check(plain.returncode == 0, "without the module: a plain run works", plain.stderr)
    out = os.path.join(tmp, "module.json")
    m = subprocess.run([a.mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "2", binary,
                        "check", model, "--precision", "float16", "--json", out, "--quiet"],
                       capture_output=True, text=True, timeout=60, env=rank_env())
    ours = [ln for ln in m.stderr.splitlines() if ln.startswith("fpguard: ")]
    check(m.returncode == 2 and len(ours) == 2 and
          all("cannot load fpguard's MPI module" in ln and "libfpguard_mpi.so" in ln
              for ln in ours),
          "without the module under mpirun: exit 2, one line a rank", (m.returncode, m.stderr))
    check(not os.path.exists(out), "without the module: no output", out)


def progress(a, tmp, example, sets):
    """--progress under mpirun: rank 0 alone draws the bar on stderr (once to 100%), counting
    the sets of every rank."""
    out = os.path.join(tmp, "progress.json")
    m = mpirun(a, 2, "check", os.path.join(example, "model.onnx"), "--inputs", sets,
               "--precision", "float16", "--progress", "--json", out)
    check(m.returncode in (0, 1), "progress: -n 2 runs", m.stderr[-2000:])
    check(f"{SETS}/{SETS} sets on 2 ranks" in m.stderr,
          "progress: the bar counts every rank's sets", m.stderr[-2000:])
    check(m.stderr.count("] 100%") == 1, "progress: one bar (rank 0's)", m.stderr[-2000:])


def parse_args():
    """--fpguard, --examples, --mpirun; with --no-mpi (a build without MPI), the skip:
    exit 77. (sets_scale_test.py's too.)"""
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard")
    ap.add_argument("--examples")
    ap.add_argument("--mpirun")
    ap.add_argument("--no-mpi", action="store_true")
    a = ap.parse_args()
    if a.no_mpi:
        print("skipped: fpguard was built without MPI (scripts/setup installs OpenMPI)")
        sys.exit(SKIP)
    return a


def main():
    a = parse_args()
    tmp = tempfile.mkdtemp(prefix="fpguard_mpi_")
    try:
        ex = lambda n: os.path.join(a.examples, n)  # noqa: E731
        f16 = ["--precision", "float16"]
        sets = make_sets(ex("superres"), os.path.join(tmp, "sr_sets"), seed=2)
        want = agree(a, tmp, ex("superres/model.onnx"), sets, "sr", f16, "fail", ranks=(2,))
        check(any(o["kind"] == "overflow" for o in want["origins"]), "sr: an overflow origin",
              want["origins"])
        sets = make_sets(ex("clean_cnn"), os.path.join(tmp, "cnn_sets"), seed=3)
        agree(a, tmp, ex("clean_cnn/model.onnx"), sets, "cnn", f16, "pass", ranks=(3,))
        cancel = cancelling_matmul(os.path.join(tmp, "cancel"))
        sets = make_sets(cancel, os.path.join(tmp, "acc_sets"), seed=3)
        want = agree(a, tmp, os.path.join(cancel, "model.onnx"), sets, "acc", f16, "fail",
                     ranks=(2,))
        check([o["node"] for o in want["origins"] if o["kind"] == "accuracy"] == ["proj"],
              "acc: the MatMul is the accuracy origin", want["origins"])
        # Generated sets (set s drawn with seed + s on whichever rank draws it).
        gen = ["--precision", "float16", "--samples", str(SETS), "--seed", "5",
               "--input", "pixels=uniform:-4:4"]
        want = agree(a, tmp, ex("superres/model.onnx"), None, "gen", gen, None, ranks=(2,))
        check(want["samples"] == SETS, "gen: 12 generated sets", want["samples"])
        # Scaled precisions: MX (nothing calibrated), and scaled FP8, whose activation amax
        # the ranks calibrate on their sets and reduce by max (exact).
        sr = os.path.join(tmp, "sr_sets")
        for prec in ("mxfp8_e4m3", "fp8"):
            agree(a, tmp, ex("superres/model.onnx"), sr, prec.replace(":", "_"),
                  ["--precision", prec], None, ranks=(2,))
        plan(a, tmp, ex("superres"))
        progress(a, tmp, ex("superres"), sr)
        corrupt(a, tmp, ex("superres"))
        out_of_memory(a, tmp)
        refused(a, tmp, ex("superres"))
        module_missing(a, tmp, ex("superres"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish("mpi")


if __name__ == "__main__":
    sys.exit(main())
