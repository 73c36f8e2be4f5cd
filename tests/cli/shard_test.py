#!/usr/bin/python3
"""Sharded checks (docs/scale.md): `check --shard I/N --json PART` on 12 generated input
sets of the examples, then `merge`, gives the JSON one `check` over all 12 sets gives —
every field: counts, strings and booleans exactly, numbers to 1e-12 relative — with the
parts in any order. Examples: superres in float16 (fails, an overflow origin), clean_cnn
in float16 (passes), and a MatMul whose products cancel (an accuracy origin, whose
contribution merge measures again on set 0); also of a sample of the sets (--sample-sets K
--seed S) and of the first K (--max-sets K); and of If/Loop bodies, whose first overflow's
iteration and input shapes come from the earliest set, whichever shard holds it; of
generated sets (--samples 12: each set drawn with its own seed, whichever shard draws it);
and of scaled precisions: MX as any, scaled FP8 with the activation amax calibrated by
`calibrate --shard` and every shard's file given to each shard (--amax), which also equals
one check calibrating on all the sets itself. Parts and amax files identify the model's
external data by content: a copy elsewhere merges, other weights are refused.
Sets are test_data_set_N directories, sharded in natural order (set 10 after set 9).
Merging refuses parts of other options or models, a shard twice, a missing shard, and an
unreadable part; --shard refuses malformed values: one line, exit 2, no output file.

    shard_test.py --fpguard PATH --examples DIR
"""
import argparse
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import check, fails, failures, run  # noqa: E402

SETS = 12


def cancelling_matmul(root):
    """Relu -> MatMul (K = 4096) whose +-1 weights cancel, fed x ~ 1000 + N(0, 1): the
    rounding of x to float16 swamps the differences, an accuracy origin at the MatMul
    (tests/analysis_test.cpp builds the same graph). The folder holds model.onnx and
    inputs/x.npy."""
    K, N = 4096, 8
    w = np.where((np.arange(K)[:, None] + np.arange(N)[None, :]) % 2 == 1, 1.0, -1.0)
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"], name="act"),
         helper.make_node("MatMul", ["a", "W"], ["y"], name="proj")],
        "cancel", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, N])],
        [numpy_helper.from_array(w.astype(np.float32), "W")])
    os.makedirs(os.path.join(root, "inputs"))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
              os.path.join(root, "model.onnx"))
    x = 1000 + np.random.default_rng(7).normal(0, 1, (4, K))
    np.save(os.path.join(root, "inputs", "x.npy"), x.astype(np.float32))
    return root


def write_sets(root, sets):
    """Each {name: array} of `sets` as test_data_set_N/input_K.pb (K in the dict's order)."""
    for s, arrays in enumerate(sets):
        d = os.path.join(root, f"test_data_set_{s}")
        os.makedirs(d)
        for k, (name, x) in enumerate(arrays.items()):
            with open(os.path.join(d, f"input_{k}.pb"), "wb") as fh:
                fh.write(numpy_helper.from_array(x, name).SerializeToString())
    return root


def make_sets(example, root, seed):
    """SETS input sets of `example`: its sample input scaled by a seeded factor in
    [0.25, 2] plus noise (about 1 in 1000 of its range)."""
    inputs = os.path.join(example, "inputs")
    (npy,) = [f for f in os.listdir(inputs) if f.endswith(".npy")]
    base = np.load(os.path.join(inputs, npy))
    rng = np.random.default_rng(seed)
    sets = []
    for s in range(SETS):
        scale = 1.0 if s == 0 else rng.uniform(0.25, 2.0)
        x = base * scale + rng.normal(0, 1e-3 * float(np.abs(base).max()), base.shape)
        sets.append({npy[:-4]: x.astype(np.float32)})
    return write_sets(root, sets)


def same(a, b, path="$"):
    """The first difference of two JSON values ("" when equal): numbers to 1e-12
    relative (integers exactly), everything else exactly."""
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or a is None:
        return "" if a == b else f"{path}: {a!r} != {b!r}"
    if isinstance(a, int) and isinstance(b, int):
        return "" if a == b else f"{path}: {a} != {b}"
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if a == b or (math.isnan(a) and math.isnan(b)):
            return ""
        ok = abs(a - b) <= 1e-12 * max(abs(a), abs(b))
        return "" if ok else f"{path}: {a!r} != {b!r}"
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, f"{path}[{i}]")
            if d:
                return d
        return ""
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            d = same(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return ""
    return f"{path}: {a!r} != {b!r}"


def load(path):
    with open(path) as fh:
        return json.load(fh)


def shard_parts(fpguard, tmp, model, sets, tag, extra):
    """check --shard i/3 for i = 0, 1, 2: the part files."""
    parts = []
    for i in range(3):
        part = os.path.join(tmp, f"{tag}_part_{i}.json")
        r = run(fpguard, "check", model, "--inputs", sets, "--shard", f"{i}/3", "--json", part,
                "--quiet", *extra)
        check(r.returncode == 0, f"{tag}: shard {i}/3 runs", r.stderr)
        parts.append(part)
    return parts


def agree(fpguard, tmp, example, tag, extra, want_verdict, count=SETS):
    """check over all sets (`count` of them chosen) == merge of the shards, in two
    orders, on sets made from the example's input (its model copied, so that merge can
    be tried without it)."""
    os.makedirs(os.path.join(tmp, tag + "_model"))
    model = shutil.copy(os.path.join(example, "model.onnx"), os.path.join(tmp, tag + "_model"))
    sets = make_sets(example, os.path.join(tmp, tag + "_sets"), seed=len(tag))
    return agree_on(fpguard, tmp, model, sets, tag, extra, want_verdict, count)


def agree_on(fpguard, tmp, model, sets, tag, extra, want_verdict, count=SETS):
    whole = os.path.join(tmp, tag + "_all.json")
    r = run(fpguard, "check", model, "--inputs", sets, "--json", whole, "--quiet", *extra)
    check(r.returncode in (0, 1), f"{tag}: check runs", r.stderr)
    want = load(whole)
    if want_verdict:
        check(want["verdict"] == want_verdict, f"{tag}: verdict", want["verdict"])
    check(want["samples"] == count, f"{tag}: all sets checked", want["samples"])
    parts = shard_parts(fpguard, tmp, model, sets, tag, extra)
    names = load(parts[1])["set_names"]
    if count == SETS:
        check(names == [f"test_data_set_{i}" for i in (1, 4, 7, 10)],
              f"{tag}: shard 1/3 takes sets 1, 4, 7, 10 (natural order)", names)
    else:  # a sample, in natural order: shard 1/3 has its 2nd, 5th, ... sets
        chosen = sorted((n for p in parts for n in load(p)["set_names"]),
                        key=lambda n: int(n.rsplit("_", 1)[1]))
        check(len(chosen) == count and names == chosen[1::3],
              f"{tag}: shard 1/3 takes sets 1, 4, ... of the sample", (names, chosen))
    for order in ([2, 0, 1], [1, 2, 0]):
        merged = os.path.join(tmp, tag + "_merged.json")
        m = run(fpguard, "merge", *[parts[i] for i in order], "--json", merged, "--quiet")
        check(m.returncode == r.returncode, f"{tag}: merge {order} exits as check does",
              (m.returncode, r.returncode, m.stderr))
        if os.path.exists(merged):
            diff = same(want, load(merged))
            check(not diff, f"{tag}: merge {order} equals check over all sets", diff)
            os.remove(merged)
    if os.path.commonpath([tmp, model]) == tmp:
        without_model(fpguard, model, parts, want, tag, r.returncode)
    return want, parts


def without_model(fpguard, model, parts, want, tag, code):
    """Merge from the parts alone, the model file moved away: the same JSON. Only accuracy
    origins (measured by running the model on set 0) and a reference model's rules (which
    compare weights) need the model file: then merge says so."""
    away = model + ".away"
    os.rename(model, away)
    try:
        merged = model + ".merged.json"
        needs = want["reference_model"] or any(o["kind"] == "accuracy" for o in want["origins"])
        if needs:
            fails(fpguard, f"{tag}: merge without the model it needs",
                  ["merge", *parts, "--json", merged], model, "--model")
            check(not os.path.exists(merged), f"{tag}: no output without the model", merged)
            return
        m = run(fpguard, "merge", *parts, "--json", merged, "--quiet")
        check(m.returncode == code, f"{tag}: merge without the model exits as check does",
              (m.returncode, code, m.stderr))
        if os.path.exists(merged):
            diff = same(want, load(merged))
            check(not diff, f"{tag}: merge without the model equals check over all sets", diff)
            os.remove(merged)
    finally:
        os.rename(away, model)


def converted(fpguard, tmp, example):
    """A converted model checked against its original (--reference-model), in shards: the
    parts identify both models."""
    model = os.path.join(example, "model.onnx")
    c16 = os.path.join(tmp, "cancel_fp16.onnx")
    r = run(fpguard, "convert", model, "--precision", "float16", "-o", c16)
    check(r.returncode in (0, 1), "convert runs", r.stderr)
    sets = os.path.join(tmp, "acc_moved")  # (the sets moved_sets left)
    want, parts = agree_on(fpguard, tmp, c16, sets, "ref",
                           ["--precision", "float16", "--reference-model", model], None)
    check(want["reference_model"] == model, "ref: the original is named", want["reference_model"])
    ident = load(parts[0])["identity"]["reference_model"]
    check(ident["path"] == model and len(ident["sha256"]) == 64, "ref: the part identifies it",
          ident)


def control_flow(fpguard, tmp):
    """Body nodes: a Loop's Add overflows float16 at an iteration that depends on the set
    (set 0 not at all); an If inside a Loop takes its multiplying branch in some sets only.
    What only the first occurrence records (the iteration of the first overflow, the input
    shapes of a branch's node) comes from the earliest set, whichever shard holds it."""
    import control_flow_test as cf
    d = os.path.join(tmp, "cf")
    os.makedirs(d)
    loop, _ = cf.loop_model(d, 10, 1.0)
    steps = [100.0] + [4000.0 * (1 + s % 4) for s in range(1, SETS)]
    sets = write_sets(os.path.join(tmp, "loop_sets"),
                      [{"x": np.array([v], np.float32)} for v in steps])
    want, _ = agree_on(fpguard, tmp, loop, sets, "loop", ["--precision", "float16"], "fail")
    got = [(o["node"], o["iteration"]) for o in want["origins"]]
    with np.errstate(over="ignore"):
        k = cf.first_f16_overflow(steps[1], 10)
    check(got == [("loop/body/acc_add", [k])],
          f"loop: the Add, first at iteration {k} (set 1's)", got)
    nested, _ = cf.nested_model(d, 8)
    sets = write_sets(os.path.join(tmp, "nested_sets"),
                      [{"c": np.array(s % 3 == 2)} for s in range(SETS)])
    want, _ = agree_on(fpguard, tmp, nested, sets, "nested", ["--precision", "float16"], "fail")
    check(any(o["node"] == "loop/body/branch/then_branch/dbl" for o in want["origins"]),
          "nested: the If's branch node is the origin", want["origins"])


def generated(fpguard, tmp, example):
    """--samples 12 generated sets (set s drawn with seed + s, whichever shard draws it),
    sharded and merged, equal one check over the 12."""
    model = os.path.join(example, "model.onnx")
    whole = os.path.join(tmp, "gen_all.json")
    extra = ["--precision", "float16", "--samples", str(SETS), "--seed", "5",
             "--input", "pixels=uniform:-4:4"]
    r = run(fpguard, "check", model, "--json", whole, "--quiet", *extra)
    check(r.returncode in (0, 1), "gen: check runs", r.stderr)
    want = load(whole)
    check(want["samples"] == SETS, "gen: all sets checked", want["samples"])
    parts = []
    for i in range(3):
        part = os.path.join(tmp, f"gen_part_{i}.json")
        p = run(fpguard, "check", model, "--shard", f"{i}/3", "--json", part, "--quiet", *extra)
        check(p.returncode == 0, f"gen: shard {i}/3 runs", p.stderr)
        parts.append(part)
    sets = load(parts[1])["states"][0]["sets"] if os.path.exists(parts[1]) else None
    check(sets == [1, 4, 7, 10], "gen: shard 1/3 draws sets 1, 4, 7, 10", sets)
    with open(model, "rb") as fh:  # the model's SHA-256 (SHA-NI or not) is hashlib's
        digest = hashlib.sha256(fh.read()).hexdigest()
    ident = load(parts[1])["identity"]["model"]["sha256"] if os.path.exists(parts[1]) else None
    check(ident == digest, "gen: the part's model sha256 is hashlib's", (ident, digest))
    merged = os.path.join(tmp, "gen_merged.json")
    m = run(fpguard, "merge", parts[2], parts[0], parts[1], "--json", merged, "--quiet")
    check(m.returncode == r.returncode, "gen: merge exits as check does", (m.returncode, m.stderr))
    if os.path.exists(merged):
        diff = same(want, load(merged))
        check(not diff, "gen: merge equals check over all generated sets", diff)


def calibrate_shards(fpguard, model, sets, out_dir, tag):
    """calibrate --shard i/3 for i = 0, 1, 2: the amax files, in `out_dir`."""
    amax = []
    for i in range(3):
        f = os.path.join(out_dir, f"amax_{i}.json")
        r = run(fpguard, "calibrate", model, "--inputs", sets, "--shard", f"{i}/3", "--json", f,
                "--quiet")
        check(r.returncode == 0, f"{tag}calibrate --shard {i}/3 runs", r.stderr)
        amax.append(f)
    return amax


def scaled(fpguard, tmp, examples):
    """Scaled precisions in shards. MX (per-block scales, nothing calibrated) shards as any
    precision. Scaled FP8's static activation scales are calibrated on every set: each
    shard's amax by `calibrate --shard`, and every shard's check takes all the files
    (--amax), whose maximum is one check's calibration; merged, they equal one check."""
    example = os.path.join(examples, "superres")
    os.makedirs(os.path.join(tmp, "scaled_model"))
    model = shutil.copy(os.path.join(example, "model.onnx"), os.path.join(tmp, "scaled_model"))
    sets = os.path.join(tmp, "sr_sets")
    agree_on(fpguard, tmp, model, sets, "mx", ["--precision", "mxfp8_e4m3"], None)
    amax = calibrate_shards(fpguard, model, sets, tmp, "")
    if all(os.path.exists(f) for f in amax):
        got = [load(f) for f in amax]
        check(all(g["kind"] == "fpguard amax" and g["amax"] for g in got),
              "calibrate writes amax", got[0])
        check(got[1]["sets"] == [1, 4, 7, 10], "calibrate --shard 1/3: sets 1, 4, 7, 10",
              got[1]["sets"])
    for prec in ("fp8", "channel:float8_e4m3fn"):
        tag = "fp8" if prec == "fp8" else "chan"
        agree_on(fpguard, tmp, model, sets, tag, ["--precision", prec, "--amax", *amax], None)
        # One check calibrating on all sets itself gives the same diagnosis.
        own = os.path.join(tmp, tag + "_own.json")
        r = run(fpguard, "check", model, "--inputs", sets, "--precision", prec, "--json", own,
                "--quiet")
        check(r.returncode in (0, 1), f"{tag}: check calibrating itself runs", r.stderr)
        if os.path.exists(own):
            diff = same(load(own), load(os.path.join(tmp, tag + "_all.json")))
            check(not diff, f"{tag}: --amax of every shard equals calibrating on all sets", diff)
    out = os.path.join(tmp, "refused.json")
    fails(fpguard, "--shard fp8 without --amax",
          ["check", model, "--precision", "fp8", "--inputs", sets, "--shard", "0/3", "--json", out],
          "--shard 0/3", "--amax")
    fails(fpguard, "--amax with a shard's file missing",
          ["check", model, "--precision", "fp8", "--inputs", sets, "--shard", "0/3", "--amax",
           amax[0], amax[2], "--json", out], "--amax", "(1, 4, 7, 10)")
    fails(fpguard, "--amax of other sets",
          ["check", model, "--precision", "fp8", "--inputs", sets, "--max-sets", "6",
           "--amax", *amax, "--json", out], amax[0], "other input sets")
    fails(fpguard, "--amax without a calibrating precision",
          ["check", model, "--precision", "float16", "--inputs", sets, "--amax", *amax,
           "--json", out], "--amax", "calibrates")
    check(not os.path.exists(out), "refusals leave no output", out)


def external_data(fpguard, tmp, examples):
    """Parts and amax files identify the model's external data by SHA-256, not by path:
    parts of a copy of the model elsewhere merge with the original's, and check --amax
    takes files of the same weights; once the weights (not the .onnx file) have changed,
    merge and check --amax refuse them."""
    d = os.path.join(tmp, "ext")
    os.makedirs(d)
    model = os.path.join(d, "model.onnx")
    onnx.save(onnx.load(os.path.join(examples, "superres", "model.onnx")), model,
              save_as_external_data=True, location="weights.bin", size_threshold=0)
    weights = os.path.join(d, "weights.bin")
    sets = os.path.join(tmp, "sr_sets")
    amax = calibrate_shards(fpguard, model, sets, d, "ext: ")
    with open(weights, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    data = load(amax[0])["data"] if os.path.exists(amax[0]) else None
    check(data is not None and len(data) == 1 and data[0]["sha256"] == digest and
          os.path.samefile(data[0]["path"], weights),
          "ext: the amax file records the external data's sha256 (hashlib's)", data)
    copy = os.path.join(tmp, "ext_copy")
    shutil.copytree(d, copy)
    f16 = ["--precision", "float16"]
    whole = os.path.join(tmp, "ext_all.json")
    r = run(fpguard, "check", model, "--inputs", sets, "--json", whole, "--quiet", *f16)
    check(r.returncode in (0, 1), "ext: check runs", r.stderr)
    parts = [os.path.join(tmp, f"ext_part_{i}.json") for i in range(3)]
    for i, where in enumerate((d, copy, copy)):
        p = run(fpguard, "check", os.path.join(where, "model.onnx"), "--inputs", sets, "--shard",
                f"{i}/3", "--json", parts[i], "--quiet", *f16)
        check(p.returncode == 0, f"ext: shard {i}/3 runs", p.stderr)
    merged = os.path.join(tmp, "ext_merged.json")
    m = run(fpguard, "merge", *parts, "--json", merged, "--quiet")
    check(m.returncode == r.returncode, "ext: parts of a copy elsewhere merge", m.stderr)
    if os.path.exists(merged) and os.path.exists(whole):
        diff = same(load(whole), load(merged))
        check(not diff, "ext: merge equals check over all sets", diff)
    out = os.path.join(d, "out.json")
    r = run(fpguard, "check", model, "--inputs", sets, "--precision", "fp8", "--amax", *amax,
            "--json", out, "--quiet")
    check(r.returncode in (0, 1), "ext: check --amax of the same weights runs", r.stderr)
    if os.path.exists(out):
        os.remove(out)
    w = np.fromfile(weights, np.float32)
    w[0] = w[0] * 2 + 1  # other weights, the same .onnx file
    w.tofile(weights)
    fails(fpguard, "--amax of other external data",
          ["check", model, "--inputs", sets, "--precision", "fp8", "--amax", *amax, "--json", out],
          amax[0], "external data")
    other = os.path.join(tmp, "ext_part_1_changed.json")
    p = run(fpguard, "check", model, "--inputs", sets, "--shard", "1/3", "--json", other,
            "--quiet", *f16)
    check(p.returncode == 0, "ext: a shard of other weights runs", p.stderr)
    fails(fpguard, "merge refuses parts of other external data",
          ["merge", parts[0], other, parts[2], "--json", out], other, "external data (sha256)")
    check(not os.path.exists(out), "refusals leave no output", out)


def parts_of(tmp, tag):
    return [os.path.join(tmp, f"{tag}_part_{i}.json") for i in range(3)]


def moved_sets(fpguard, tmp, example, want, parts):
    """The accuracy origin's contribution is measured again on set 0: once the sets have
    moved, merge needs --inputs (the set verified by sha256), and --model checks its file."""
    sets = os.path.join(tmp, "acc_sets")
    moved = os.path.join(tmp, "acc_moved")
    os.rename(sets, moved)
    out = os.path.join(tmp, "acc_moved.json")
    fails(fpguard, "merge without the sets", ["merge", *parts, "--json", out],
          "test_data_set_0", "--inputs names the directory")
    r = run(fpguard, "merge", *parts, "--inputs", moved, "--json", out, "--quiet")
    check(r.returncode == 1, "merge --inputs runs", r.stderr)
    if os.path.exists(out):
        diff = same(want, load(out))
        check(not diff, "merge --inputs equals check over all sets", diff)
        os.remove(out)
    # Another set 0 under the same name is refused.
    shutil.copytree(os.path.join(moved, "test_data_set_1"), os.path.join(tmp, "acc_fake",
                                                                          "test_data_set_0"))
    fails(fpguard, "merge refuses another set 0",
          ["merge", *parts, "--inputs", os.path.join(tmp, "acc_fake"), "--json", out],
          "test_data_set_0", "sha256 differs")
    fails(fpguard, "merge --model refuses another model",
          ["merge", *parts, "--inputs", moved, "--model",
           os.path.join(tmp, "sr_sets", "..", "cancel", "inputs", "x.npy"), "--json", out],
          "x.npy", "is not the model the parts were checked with")
    check(not os.path.exists(out), "refusals leave no output", out)


def refusals(fpguard, tmp, examples, parts):
    model = os.path.join(examples, "superres", "model.onnx")
    sets = os.path.join(tmp, "sr_sets")
    out = os.path.join(tmp, "refused.json")
    other = os.path.join(tmp, "cosine_part_1.json")
    r = run(fpguard, "check", model, "--inputs", sets, "--shard", "1/3", "--json", other,
            "--quiet", "--precision", "float16", "--min-cosine", "0.99")
    check(r.returncode == 0, "other options: shard runs", r.stderr)
    fails(fpguard, "merge refuses other options", ["merge", parts[0], other, parts[2], "--json", out],
          other, 'option "min_cosine"', "0.99")
    fails(fpguard, "merge refuses another model",
          ["merge", parts[0], os.path.join(tmp, "cnn_part_1.json"), parts[2], "--json", out],
          "cnn_part_1.json", "model (sha256)")
    fails(fpguard, "merge refuses a shard twice",
          ["merge", parts[0], parts[1], parts[1], parts[2], "--json", out], parts[1], "also in")
    fails(fpguard, "merge refuses a missing shard", ["merge", parts[0], parts[2], "--json", out],
          "4 of 12 input sets are in no part (1, 4, 7, 10)", "a shard is missing")
    fails(fpguard, "merge refuses an unreadable part",
          ["merge", parts[0], os.path.join(tmp, "nope.json"), "--json", out], "nope.json",
          "cannot be read")
    for bad, needle in (("3/3", "less than N"), ("0/0", "at least 1"), ("x", "expected I/N"),
                        ("1/", "expected I/N")):
        fails(fpguard, f"--shard {bad}",
              ["check", model, "--precision", "float16", "--inputs", sets, "--shard", bad, "--json",
               out], "--shard", needle)
    fails(fpguard, "--shard without --json",
          ["check", model, "--precision", "float16", "--inputs", sets, "--shard", "0/2"], "--json")
    fails(fpguard, "--shard with more shards than sets",
          ["check", model, "--precision", "float16", "--samples", "2", "--shard", "2/3", "--json",
           out], "--shard", "no input sets")
    check(not os.path.exists(out), "refusals leave no output", out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    ap.add_argument("--examples", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="fpguard_shard_")
    try:
        ex = lambda n: os.path.join(a.examples, n)  # noqa: E731
        want, parts = agree(a.fpguard, tmp, ex("superres"), "sr", ["--precision", "float16"], "fail")
        check(any(o["kind"] == "overflow" for o in want["origins"]), "sr: an overflow origin",
              want["origins"])
        agree(a.fpguard, tmp, ex("clean_cnn"), "cnn", ["--precision", "float16"], "pass")
        cancel = cancelling_matmul(os.path.join(tmp, "cancel"))
        want, _ = agree(a.fpguard, tmp, cancel, "acc", ["--precision", "float16"], "fail")
        check([o["node"] for o in want["origins"] if o["kind"] == "accuracy"] == ["proj"],
              "acc: the MatMul is the accuracy origin", want["origins"])
        moved_sets(a.fpguard, tmp, cancel, want, parts_of(tmp, "acc"))
        agree(a.fpguard, tmp, cancel, "sample",
              ["--precision", "float16", "--sample-sets", "7", "--seed", "4"], "fail", count=7)
        agree(a.fpguard, tmp, cancel, "max", ["--precision", "bfloat16", "--max-sets", "5"],
              "fail", count=5)
        converted(a.fpguard, tmp, cancel)
        generated(a.fpguard, tmp, ex("superres"))
        scaled(a.fpguard, tmp, a.examples)
        external_data(a.fpguard, tmp, a.examples)
        control_flow(a.fpguard, tmp)
        refusals(a.fpguard, tmp, a.examples, parts)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
