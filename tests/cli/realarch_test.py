#!/usr/bin/python3
"""Real architectures, small: the DBNet-style detector (MobileNetV3 backbone with HardSwish
and squeeze-excitation, FPN with nearest and bilinear Resize, ConvTranspose head), the CRNN
recognizer (conv stack, 2-layer bidirectional LSTM, Linear) and the U-Net (MaxPool down,
ConvTranspose up, skip concatenations) of the real-architecture benchmark set, built by
the same functions of bench/make_real_models.py with tiny widths and exported the same way
(opset 17, BatchNorm statistics from the seeded network's own activations).

- `fpguard run` against PyTorch's own output of the module (float32, eval mode), the
  independent reference: |fpguard - torch| <= 1e-4 |torch| + 1e-5 (float32 sums in
  different orders), the bound bench/ort_compare.js applies against ONNX Runtime;
- the CRNN's `run` on two threads (its bidirectional LSTM's directions side by side) gives
  the 1-thread outputs bit for bit;
- `fpguard check --precision float16`: these seeded networks keep their activations in
  float16's range (checked here on PyTorch's activations: every absmax below 65504), so
  the verdict must be a pass with no origin, every output's cosine >= 0.999.

    realarch_test.py --fpguard PATH
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from clitest import check, check_json, failures, read_outputs, run  # noqa: E402
from make_bench_models import export  # noqa: E402
from make_real_models import CRNN, OPSET, DBNet, UNet, calibrate  # noqa: E402

# One thread: with the other core busy (ctest -j2, other builds), two OpenMP threads
# spinning at barriers made these millisecond runs take seconds (issue 20, "Under load").
THREADS = ("--threads", "1")
CASES = [  # name, module factory, input shape, the ops the export must contain
    ("dbnet", lambda: DBNet(inner=16, width_mult=0.25), (1, 3, 64, 64),
     {"HardSwish", "Resize", "ConvTranspose", "GlobalAveragePool", "HardSigmoid"}),
    ("crnn", lambda: CRNN(widths=(4, 8, 8, 8, 16, 16), hidden=8, layers=2, classes=11),
     (1, 3, 16, 64), {"LSTM", "MaxPool"}),
    ("unet", lambda: UNet(base=4, depth=2), (1, 3, 32, 32), {"ConvTranspose", "Concat"}),
]


def max_activation(model, x):
    """The largest |value| any leaf module produces on x (PyTorch's run)."""
    seen = [0.0]

    def hook(_m, _i, out):
        for t in out if isinstance(out, tuple) else (out,):
            if torch.is_tensor(t) and t.is_floating_point():
                seen[0] = max(seen[0], float(t.abs().max()))

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if not list(m.children())]
    with torch.no_grad():
        model(torch.from_numpy(x))
    for h in handles:
        h.remove()
    return seen[0]


def test_case(f, tmp, name, make, shape, ops):
    import onnx
    torch.manual_seed(0)
    model = calibrate(make(), (2,) + shape[1:])
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    folder = os.path.join(tmp, name)
    export(model, x, "image", "out", folder, opset=OPSET)
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    path = os.path.join(folder, "model.onnx")
    present = {n.op_type for n in onnx.load(path).graph.node}
    check(ops <= present, f"{name}: the export has {sorted(ops)}", sorted(present))

    out = os.path.join(tmp, name + "_out")
    r = run(f, "run", path, "--inputs", os.path.join(folder, "inputs"), "--outputs", out,
            *THREADS)
    check(r.returncode == 0, f"{name}: fpguard run", r.stderr)
    if r.returncode == 0:
        got = read_outputs(out)["out"]
        check(got.shape == want.shape, f"{name}: output shape", (got.shape, want.shape))
        if got.shape == want.shape:
            err = np.abs(got.astype(np.float64) - want) / (1e-4 * np.abs(want) + 1e-5)
            check(err.max() <= 1, f"{name}: run matches PyTorch within 1e-4 rel + 1e-5",
                  f"{err.max():.3g}x the tolerance")
        if "LSTM" in ops:  # two threads run the two directions side by side: same bits
            out2 = os.path.join(tmp, name + "_out2")
            r = run(f, "run", path, "--inputs", os.path.join(folder, "inputs"), "--outputs",
                    out2, "--threads", "2")
            check(r.returncode == 0, f"{name}: fpguard run --threads 2", r.stderr)
            if r.returncode == 0:
                two = read_outputs(out2)["out"]
                check(two.tobytes() == got.tobytes(), f"{name}: 2 threads give the same bits",
                      np.abs(two.astype(np.float64) - got).max())

    amax = max_activation(model, x)
    check(amax < 65504, f"{name}: setup: PyTorch's activations fit float16", amax)
    r, j = check_json(f, tmp, path, os.path.join(folder, "inputs"), "--precision", "float16",
                      *THREADS)
    if j:
        check(r.returncode == 0 and j["verdict"] == "pass", f"{name}: float16 check passes",
              (r.returncode, j["verdict"]))
        check(not j["origins"], f"{name}: no origin", j["origins"])
        for o in j["outputs"]:
            check(o["cosine"] >= 0.999 and o["nonfinite"] == 0,
                  f"{name}: {o['name']} cosine >= 0.999, all finite", o)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            test_case(a.fpguard, tmp, *case)
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print(f"realarch: {len(CASES)} small real architectures run and checked")


if __name__ == "__main__":
    main()
