#!/usr/bin/python3
"""Input sets at scale (docs/scale.md, issue 22), the paths shard_test and mpi_test leave:

- `.npz` sets (one set per file, arrays named by graph input; stored and deflated alike)
  give the JSON the same arrays as test_data_set_N directories give, and through
  `check --shard` + `merge` (parts in a shuffled order) and `mpirun -n 2` / `-n 3` the JSON
  of one process: every field (shard_test.same: counts exactly, numbers to 1e-12).
- 250 sets of a small model: natural order (s_2 before s_10; Python's own sort is the
  reference), a shard's part is reproducible byte for byte, 4 shards merged and 3 ranks
  equal one process, and so do `--max-sets 230` and `--sample-sets 40 --seed S` (40
  distinct sets in natural order, another seed another sample).
- A set too large for one rank (`--max-memory` below its .npz member's size): the shard
  that holds it, and `mpirun -n 3` (rank 1 holds it), exit 2 with one error line naming
  the set and --max-memory, within 30 s, with nothing on stdout and no output file.
- Threads: a part records the threads its shard ran on: the cores of its CPU affinity
  (os.sched_getaffinity; 1 under `taskset -c 0`), or --threads. Under mpirun each rank's
  default is its share of the cores: the cores of its affinity divided by the most ranks of
  the machine that may run on one of them, computed here from the masks the ranks of the
  same mpirun line report, shown by rank 0's --progress ("on 3 ranks x 1 thread").

    sets_scale_test.py --fpguard PATH --examples DIR             (shards, merge)
    sets_scale_test.py --fpguard PATH --examples DIR --mpirun M  (the same under mpirun)
    sets_scale_test.py --no-mpi        (a build without MPI: reports the skip, exit 77)
"""
import os
import re
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
from mpi_test import mpirun, parse_args, rank_env  # noqa: E402
from shard_test import load, same, write_sets  # noqa: E402

SETS = 12
MANY = 250


def natural(name):
    """Natural order's key: digit runs compare as numbers."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def npz_sets(root, sets, prefix="set_"):
    """Each {name: array} of `sets` as PREFIX<s>.npz; odd sets deflated (savez_compressed)."""
    os.makedirs(root)
    for s, arrays in enumerate(sets):
        save = np.savez_compressed if s % 2 else np.savez
        save(os.path.join(root, f"{prefix}{s}.npz"), **arrays)
    return root


def superres_arrays(example, seed):
    """SETS sets of the example's input, scaled by a seeded factor, with some noise."""
    base = np.load(os.path.join(example, "inputs", "pixels.npy"))
    rng = np.random.default_rng(seed)
    return [{"pixels": (base * (1.0 if s == 0 else rng.uniform(0.25, 2.0)) +
                        rng.normal(0, 1e-3, base.shape)).astype(np.float32)}
            for s in range(SETS)]


def small_model(root):
    """x [4, 16] -> MatMul -> Relu -> MatMul -> y: a check of a set takes milliseconds."""
    rng = np.random.default_rng(22)
    w1 = rng.normal(0, 0.5, (16, 16)).astype(np.float32)
    w2 = rng.normal(0, 0.5, (16, 8)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1"),
         helper.make_node("Relu", ["h"], ["a"], name="act"),
         helper.make_node("MatMul", ["a", "W2"], ["y"], name="mm2")],
        "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(w2, "W2")])
    os.makedirs(root)
    path = os.path.join(root, "model.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def small_sets(root, count, big=None):
    """`count` sets s_0.npz ... of x ~ N(0, 1) * (1 + s / 10); set `big` holds an x of
    [4, 65536] (1 MiB): too large for --max-memory 256K."""
    rng = np.random.default_rng(5)
    sets = []
    for s in range(count):
        shape = (4, 65536) if s == big else (4, 16)
        sets.append({"x": (rng.normal(0, 1, shape) * (1 + s / 10)).astype(np.float32)})
    return npz_sets(root, sets, prefix="s_")


def one_process(a, model, extra, tag):
    """check in one process: (its exit code, its JSON)."""
    out = os.path.join(a.tmp, tag + "_one.json")
    r = run(a.fpguard, "check", model, "--json", out, "--quiet", *extra)
    check(r.returncode in (0, 1), f"{tag}: check runs", r.stderr)
    return r.returncode, (load(out) if os.path.exists(out) else None)


def sharded(a, model, extra, tag, n, order):
    """check --shard i/n for every i, merged with the parts in `order`: (the parts, the
    merge's exit code, its JSON)."""
    parts = []
    for i in range(n):
        part = os.path.join(a.tmp, f"{tag}_part_{i}.json")
        r = run(a.fpguard, "check", model, "--shard", f"{i}/{n}", "--json", part, "--quiet",
                *extra)
        check(r.returncode == 0, f"{tag}: shard {i}/{n} runs", r.stderr)
        parts.append(part)
    merged = os.path.join(a.tmp, tag + "_merged.json")
    m = run(a.fpguard, "merge", *[parts[i] for i in order], "--json", merged, "--quiet")
    check(m.returncode in (0, 1), f"{tag}: merge runs", m.stderr)
    return parts, m.returncode, (load(merged) if os.path.exists(merged) else None)


def agree(a, model, extra, tag, shards, order, ranks):
    """One process == the shards merged (shard mode) or == `ranks` ranks (MPI mode)."""
    code, want = one_process(a, model, extra, tag)
    if want is None:
        return None, []
    parts = []
    if not a.mpirun:
        parts, m_code, got = sharded(a, model, extra, tag, shards, order)
        check(m_code == code, f"{tag}: merge exits as check does", (m_code, code))
        check(got is not None and not same(want, got),
              f"{tag}: merge of {shards} shards equals one process",
              got and same(want, got))
    for n in ranks if a.mpirun else ():
        out = os.path.join(a.tmp, f"{tag}_{n}.json")
        m = mpirun(a, n, "check", model, "--json", out, "--quiet", *extra, timeout=300)
        check(m.returncode == code, f"{tag}: -n {n} exits as one process does",
              (m.returncode, code, m.stderr[-2000:]))
        got = load(out) if os.path.exists(out) else None
        check(got is not None and not same(want, got), f"{tag}: -n {n} equals one process",
              got and same(want, got))
    return want, parts


def npz(a, example):
    """.npz sets: as test_data_set_N directories; sharded and merged; under mpirun."""
    arrays = superres_arrays(example, seed=8)
    sets = npz_sets(os.path.join(a.tmp, "npz_sets"), arrays)
    model = os.path.join(example, "model.onnx")
    f16 = ["--precision", "float16"]
    want, _ = agree(a, model, ["--inputs", sets, *f16], "npz", 3, [2, 0, 1], (2, 3))
    if a.mpirun or want is None:
        return
    check(want["samples"] == SETS and want["verdict"] == "fail", "npz: 12 sets, fails",
          (want["samples"], want["verdict"]))
    pb = write_sets(os.path.join(a.tmp, "pb_sets"), arrays)
    _, as_pb = one_process(a, model, ["--inputs", pb, *f16], "pb")
    check(as_pb is not None and not same(as_pb, want),
          "npz: the JSON of the same arrays as test_data_set_N directories",
          as_pb and same(as_pb, want))


def many(a):
    """250 sets: natural order, reproducible parts, merge and ranks equal one process; of
    all, of the first 230, of a sample of 40."""
    model = small_model(os.path.join(a.tmp, "small"))
    sets = small_sets(os.path.join(a.tmp, "many_sets"), MANY)
    names = sorted(os.listdir(sets), key=natural)
    check(names[:3] == ["s_0.npz", "s_1.npz", "s_2.npz"] and names[10] == "s_10.npz",
          "many: the reference's natural order", names[:12])
    f16 = ["--precision", "float16", "--inputs", sets]
    want, parts = agree(a, model, f16, "many", 4, [3, 1, 0, 2], (3,))
    if want is not None:
        check(want["samples"] == MANY, "many: every set checked", want["samples"])
    if parts and os.path.exists(parts[1]):
        got = load(parts[1])
        check(got["set_names"] == names[1::4] and got["states"][0]["sets"] ==
              list(range(1, MANY, 4)), "many: shard 1/4 takes sets 1, 5, 9, ... in natural order",
              got["set_names"][:6])
        again = os.path.join(a.tmp, "many_again.json")
        r = run(a.fpguard, "check", model, "--shard", "1/4", "--json", again, "--quiet", *f16)
        check(r.returncode == 0, "many: shard 1/4 again runs", r.stderr)
        with open(parts[1], "rb") as x, open(again, "rb") as y:
            check(x.read() == y.read(), "many: a shard's part is reproducible, byte for byte")
    want, parts = agree(a, model, [*f16, "--max-sets", "230"], "first", 3, [1, 2, 0], (2,))
    if want is not None:
        check(want["samples"] == 230, "first: --max-sets 230 checks 230 sets", want["samples"])
    if parts and all(os.path.exists(p) for p in parts):
        got = sorted((n for p in parts for n in load(p)["set_names"]), key=natural)
        check(got == names[:230], "first: the first 230 in natural order", got[-3:])
    sample = [*f16, "--sample-sets", "40", "--seed", "9"]
    want, parts = agree(a, model, sample, "sample", 3, [2, 1, 0], (3,))
    if want is not None:
        check(want["samples"] == 40, "sample: 40 sets checked", want["samples"])
    if parts and all(os.path.exists(p) for p in parts):
        chosen = [load(p)["set_names"] for p in parts]
        every = sorted((n for c in chosen for n in c), key=natural)
        check(len(set(every)) == 40 and set(every) <= set(names),
              "sample: 40 distinct sets of the directory", every)
        check(chosen[1] == every[1::3], "sample: shard 1/3 takes the sample's 2nd, 5th, ...",
              (chosen[1], every))
        other = os.path.join(a.tmp, "sample_other.json")
        r = run(a.fpguard, "check", model, "--shard", "0/1", "--json", other, "--quiet",
                *f16, "--sample-sets", "40", "--seed", "10")
        check(r.returncode == 0, "sample: another seed runs", r.stderr)
        if os.path.exists(other):
            check(sorted(load(other)["set_names"], key=natural) != every,
                  "sample: another seed, another sample")


def too_large(a):
    """Set 4's x is 1 MiB, over --max-memory 256K: the shard (4 mod 3 = 1) or rank that
    reads it ends the run with one line naming it, exit 2, in time, no output."""
    model = os.path.join(a.tmp, "small", "model.onnx")
    sets = small_sets(os.path.join(a.tmp, "big_sets"), SETS, big=4)
    out = os.path.join(a.tmp, "big.json")
    argv = ["check", model, "--inputs", sets, "--precision", "float16", "--max-memory", "256K",
            "--json", out]
    cases = [(f"-n {n}", lambda n=n: mpirun(a, n, *argv, timeout=30)) for n in (3,)] \
        if a.mpirun else [("shard 1/3", lambda: run(a.fpguard, *argv, "--shard", "1/3",
                                                    timeout=30))]
    for case, go in cases:
        start = time.monotonic()
        try:
            r = go()
        except subprocess.TimeoutExpired:
            check(False, f"{case}: a set too large ends the run within 30 s", "timed out")
            continue
        took = time.monotonic() - start
        ours = [ln for ln in r.stderr.splitlines() if ln.startswith("fpguard: ")]
        check(r.returncode == 2, f"{case}: a set too large: exit 2", (r.returncode, r.stderr))
        check(len(ours) == 1 and ours[0].startswith("fpguard: error: "),
              f"{case}: one error line", r.stderr)
        check(ours and "s_4.npz" in ours[0] and "--max-memory" in ours[0],
              f"{case}: the line names the set and --max-memory", r.stderr)
        check(r.stdout == "", f"{case}: nothing on stdout", r.stdout)
        check(not os.path.exists(out), f"{case}: no output file", out)
        check(took < 30, f"{case}: within 30 s", took)
    if not a.mpirun:  # the other shards hold no set too large
        r = run(a.fpguard, *argv[:-1], os.path.join(a.tmp, "big_0.json"), "--shard", "0/3")
        check(r.returncode == 0, "shard 0/3 (set 4 not in it) runs under --max-memory 256K",
              r.stderr)


def part_threads(a, *prefix_and_flags):
    """The "threads" a shard's part records, run as PREFIX fpguard check ... FLAGS."""
    prefix, flags = prefix_and_flags if prefix_and_flags else ([], [])
    model = os.path.join(a.tmp, "small", "model.onnx")
    part = os.path.join(a.tmp, "threads_part.json")
    cmd = [*prefix, a.fpguard, "check", model, "--inputs", os.path.join(a.tmp, "many_sets"),
           "--max-sets", "8", "--precision", "float16", "--shard", "0/2", "--json", part,
           "--quiet", *flags]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"threads: {cmd[:3]} {flags} runs", r.stderr)
    return load(part).get("threads") if os.path.exists(part) else None


def threads(a):
    """A shard's threads: its affinity's cores, or --threads. Under mpirun: each rank's
    share of the cores of its affinity (the reference computes it from the ranks' masks)."""
    if not a.mpirun:
        cores = len(os.sched_getaffinity(0))
        got = part_threads(a)
        check(got == cores, "threads: a shard runs on the cores of its affinity", (got, cores))
        got = part_threads(a, [], ["--threads", "3"])
        check(got == 3, "threads: --threads 3", got)
        if shutil.which("taskset"):
            got = part_threads(a, ["taskset", "-c", str(min(os.sched_getaffinity(0)))], [])
            check(got == 1, "threads: under taskset -c N, 1", got)
        return
    sets = os.path.join(a.tmp, "many_sets")
    model = os.path.join(a.tmp, "small", "model.onnx")
    cores = len(os.sched_getaffinity(0))
    # -n 2 binds each rank to a core where there are 2 (OpenMPI); -n 3 oversubscribed binds
    # none: three ranks share every core.
    for n, over in ((2, cores < 2), (3, True)):
        flags = ["--oversubscribe"] if over else []
        # (Each rank writes its own file: mpirun may interleave the ranks' stdout.)
        probe_dir = os.path.join(a.tmp, f"probe_{n}")
        os.makedirs(probe_dir)
        probe = subprocess.run(
            [a.mpirun, "--allow-run-as-root", *flags, "-n", str(n), sys.executable, "-c",
             "import os, socket, sys; r = os.environ['OMPI_COMM_WORLD_RANK'];"
             " open(os.path.join(sys.argv[1], r), 'w').write(' '.join([socket.gethostname(),"
             " *map(str, sorted(os.sched_getaffinity(0)))]))", probe_dir],
            capture_output=True, text=True, timeout=120, env=rank_env())
        check(probe.returncode == 0, f"threads -n {n}: the probe runs", probe.stderr[-1000:])
        masks = {}
        for rank in os.listdir(probe_dir):
            with open(os.path.join(probe_dir, rank)) as fh:
                host, *cpus = fh.read().split()
            masks[int(rank)] = (host, set(map(int, cpus)))
        if sorted(masks) != list(range(n)):
            check(False, f"threads -n {n}: every rank's mask", masks)
            continue
        want = []
        for r in sorted(masks):
            host, mine = masks[r]
            most = max(sum(1 for h, m in masks.values() if h == host and c in m) for c in mine)
            want.append(max(1, len(mine) // most))
        lo, hi = min(want), max(want)
        text = (str(lo) if lo == hi else f"{lo}-{hi}") + (" thread" if hi == 1 else " threads")
        out = os.path.join(a.tmp, "threads.json")
        m = subprocess.run(
            [a.mpirun, "--allow-run-as-root", *flags, "-n", str(n), a.fpguard, "check", model,
             "--inputs", sets, "--max-sets", "24", "--precision", "float16", "--progress",
             "--json", out], capture_output=True, text=True, timeout=300, env=rank_env())
        check(m.returncode in (0, 1), f"threads -n {n}: check runs", m.stderr[-2000:])
        shown = re.findall(r"sets on (\d+) ranks x ([\d-]+ threads?)", m.stderr)
        check(shown and shown[-1] == (str(n), text),
              f"threads -n {n}: rank 0 shows each rank's share of the cores ({text})",
              (shown[-1:], masks))
        check(sum(want) <= max(cores, n) if over else all(w <= len(masks[r][1])
                                                          for r, w in enumerate(want)),
              f"threads -n {n}: the ranks' threads do not oversubscribe", (want, cores))
        m = subprocess.run(
            [a.mpirun, "--allow-run-as-root", *flags, "-n", str(n), a.fpguard, "check", model,
             "--inputs", sets, "--max-sets", "24", "--precision", "float16", "--progress",
             "--threads", "2", "--json", out], capture_output=True, text=True, timeout=300,
            env=rank_env())
        shown = re.findall(r"sets on (\d+) ranks x ([\d-]+ threads?)", m.stderr)
        check(shown and shown[-1] == (str(n), "2 threads"), f"threads -n {n}: --threads 2",
              shown[-1:])


def main():
    a = parse_args()
    a.tmp = tempfile.mkdtemp(prefix="fpguard_sets_scale_")
    try:
        npz(a, os.path.join(a.examples, "superres"))
        many(a)
        too_large(a)
        threads(a)
    finally:
        shutil.rmtree(a.tmp, ignore_errors=True)
    return finish("sets_scale" + (" (mpirun)" if a.mpirun else ""))


if __name__ == "__main__":
    sys.exit(main())
