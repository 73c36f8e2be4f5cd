#!/usr/bin/python3
"""`fpguard run` fuses a Conv with the element-wise node after it (docs/executor.md,
"Fusion"): the outputs must be those of `run --no-fusion` byte for byte, in float32 and in
emulated float16, on conv networks built by the bench scripts (the bench ResNet: Conv ->
Relu and Conv -> Add; the super-resolution net: Conv -> Tanh) and the small real
architectures of cli.realarch (DBNet-style: HardSwish, HardSigmoid, Relu; U-Net; CRNN), on
small BERT and GPT-2 encoders of the real-architecture script (MatMul -> bias Add -> GELU
as PyTorch exports it: Div, Erf, Add, Mul, Mul; Mul, ..., Tanh, Add, Mul, Mul), and on
every model.onnx under --models DIRS (the bench and real sets, when given).
`--profile FILE` names each fused node's Conv (`fused_into`) and the text says so.

    fusion_test.py --fpguard PATH [--models DIR ...]
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from clitest import check, finish, run  # noqa: E402
from make_bench_models import ResNet, SuperRes, export  # noqa: E402
from make_real_models import (CRNN, GPT2, OPSET, Bert, DBNet, UNet,  # noqa: E402
                              calibrate)

THREADS = ("--threads", "1")  # see realarch_test.py: ctest -j2 leaves no second core
# name, module factory, input shape, fusions expected in float32 and in float16 (where an
# activation the Conv kernel applies must be Relu, which commutes with the rounding, and a
# fused Add rounds each result after it as the nodes apart)
SMALL = [
    ("resnet", ResNet, (1, 3, 64, 64), {"Relu", "Add"}, {"Relu", "Add"}),
    ("superres", lambda: SuperRes(), (1, 1, 32, 32), {"Tanh"}, set()),
    ("dbnet", lambda: DBNet(inner=16, width_mult=0.25), (1, 3, 64, 64),
     {"HardSwish", "Relu"}, {"Relu"}),
    ("unet", lambda: UNet(base=4, depth=2), (1, 3, 32, 32), {"Relu"}, {"Relu"}),
    ("crnn", lambda: CRNN(widths=(4, 8, 8, 8, 16, 16), hidden=8, layers=2, classes=11),
     (1, 3, 16, 64), {"Relu"}, {"Relu"}),
    ("bert", lambda: Bert(vocab=100, d=32, h=4, layers=2, ff=64, positions=16), (1, 8),
     {"Add", "Div", "Erf", "Mul"}, {"Add", "Div", "Erf", "Mul"}),
    ("gpt2", lambda: GPT2(vocab=100, d=32, h=4, layers=2, positions=16), (1, 8),
     {"Add", "Mul", "Tanh"}, {"Add", "Mul", "Tanh"}),
]
# In the conv networks those activations follow a Conv directly: in float16 they must not
# fuse (only Relu commutes with the rounding of the Conv's output).
CONV_ONLY16 = {"HardSwish", "HardSigmoid", "Sigmoid", "Tanh"}


def build(tmp, name, make, shape):
    torch.manual_seed(0)
    model = make().eval()
    if name in ("dbnet", "unet", "crnn"):
        model = calibrate(model, (2,) + shape[1:])
    rng = np.random.default_rng(0)
    folder = os.path.join(tmp, name)
    if name in ("bert", "gpt2"):  # token ids (and BERT's attention mask)
        ids = rng.integers(0, 100, shape).astype(np.int64)
        x = (ids, np.ones(shape, np.int64)) if name == "bert" else (ids,)
        export(model, x, ["input_ids", "attention_mask"][:len(x)], "out", folder, opset=OPSET)
    else:
        x = rng.uniform(-1, 1, shape).astype(np.float32)
        export(model, x, "image", "out", folder, opset=OPSET)
    return os.path.join(folder, "model.onnx")


def outputs_bytes(d):
    with open(os.path.join(d, "outputs.json")) as fh:
        j = json.load(fh)
    out = {}
    for t in j["tensors"]:
        with open(os.path.join(d, t["file"]), "rb") as fh:
            out[t["name"]] = fh.read()
    return out


def compare(f, tmp, name, path, precision, expect):
    """run fused and with --no-fusion in `precision`: the same bytes; returns the op types
    of the fused nodes (from --profile's JSON)."""
    inputs = os.path.join(os.path.dirname(path), "inputs")
    feed = ("--inputs", inputs) if os.path.isdir(inputs) else ()
    got = {}
    for mode in ("fused", "apart"):
        out = os.path.join(tmp, f"{name}_{precision}_{mode}")
        prof = out + ".json"
        argv = ["run", path, *feed, "--precision", precision, "--outputs", out, *THREADS,
                "--profile", prof, "--repeat", "2"]
        if mode == "apart":
            argv.append("--no-fusion")
        r = run(f, *argv, timeout=900)
        check(r.returncode == 0, f"{name} {precision} {mode}: runs", r.stderr[-500:])
        if r.returncode != 0:
            return set()
        with open(prof) as fh:
            p = json.load(fh)
        got[mode] = (outputs_bytes(out), p, r.stdout)
    fused_ops = {n["op_type"] for n in got["fused"][1]["nodes"] if "fused_into" in n}
    check(not any("fused_into" in n for n in got["apart"][1]["nodes"]),
          f"{name} {precision}: --no-fusion fuses nothing")
    for n in got["fused"][1]["nodes"]:
        if "fused_into" in n:
            check(n["ms"] == 0 and n["fused_into"], f"{name}: {n['name']} is timed in its Conv",
                  n)
    check(("ran fused into the node before" in got["fused"][2]) == bool(fused_ops),
          f"{name} {precision}: the text says what ran fused", got["fused"][2][-400:])
    a, b = got["fused"][0], got["apart"][0]
    check(a.keys() == b.keys(), f"{name} {precision}: the same outputs", (a.keys(), b.keys()))
    for k in a:
        check(a[k] == b.get(k), f"{name} {precision}: output {k} byte for byte")
    if expect is not None:
        check(expect <= fused_ops, f"{name} {precision}: fuses {sorted(expect)}",
              sorted(fused_ops))
    return fused_ops


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    ap.add_argument("--models", nargs="*", default=[],
                    help="directories of <name>/model.onnx (+ inputs/) to compare too")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name, make, shape, expect, expect16 in SMALL:
            path = build(tmp, name, make, shape)
            compare(a.fpguard, tmp, name, path, "float32", expect)
            fused = compare(a.fpguard, tmp, name, path, "float16", expect16)
            if name not in ("bert", "gpt2"):
                check(not fused & CONV_ONLY16, f"{name} float16: no activation but Relu fuses "
                      "into a Conv", sorted(fused))
        for d in a.models:
            for name in sorted(os.listdir(d)):
                path = os.path.join(d, name, "model.onnx")
                if os.path.exists(path):
                    for precision in ("float32", "float16"):
                        fused = compare(a.fpguard, tmp, name, path, precision, None)
                        print(f"{name} {precision}: fused {sorted(fused)}")
    return finish("fusion")


if __name__ == "__main__":
    sys.exit(main())
