#!/usr/bin/python3
"""Expected behaviour of torch.cuda.amp.GradScaler, for fpguard::LossScaler's tests.

Writes a JSON file with
  - traces: scripted sequences of update(found_inf) / update(new_scale) calls and the
    (scale, growth_tracker) after every step;
  - set_scale: what GradScaler.update(new_scale) stores for awkward new_scale values
    (or that torch refuses them);
  - unscale: gradient arrays before and after GradScaler.unscale_, with found_inf.
Floating values are written as bit patterns (float32 as uint32, float64 as uint64) so
the comparison can be exact.

Where the numbers come from. GradScaler itself needs CUDA (GradScaler(enabled=True)
disables itself without it), and its two kernels, torch._amp_update_scale_ and
torch._amp_foreach_non_finite_check_and_unscale_, have no CPU implementation in torch
1.13 (Debian's python3-torch: "Could not run ... with arguments from the 'CPU'
backend"). So this script calls the real kernels on a CUDA device when torch has one,
and otherwise replicates them step for step in torch tensor arithmetic, following
grad_scaler.py (inv_scale = scale.double().reciprocal().float(); update_scale_ on a
float32 scale tensor and an int32 tracker) and the CUDA kernels of torch 1.13
(aten/src/ATen/native/cuda/AmpKernels.cu):
  amp_update_scale_cuda_kernel: float scale * double factor, stored back as float; no
    cap on growth (torch >= 2.1 keeps the old scale when the grown one is not finite);
  unscale: found_inf |= !isfinite((float)g); g = (inv_scale == 1.f) ? g : g * inv_scale
    in the gradient's opmath type (float for float32, double for float64).
The JSON records which of the two was used ("update_method", "unscale_method").

    grad_scaler_trace.py --out PATH
"""

import argparse
import json
import sys

import torch

F32, F64 = torch.float32, torch.float64


def bits32(t):
    return [int(v) for v in t.to(F32).contiguous().view(torch.int32).tolist()]


def bits64(t):
    return [int(v) for v in t.to(F64).contiguous().view(torch.int64).tolist()]


def u32(v):
    return v & 0xFFFFFFFF


def u64(v):
    return v & 0xFFFFFFFFFFFFFFFF


def device():
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


# ---- _amp_update_scale_ -----------------------------------------------------------------


def update_scale_replica(scale, tracker, found_inf, growth_factor, backoff_factor, interval):
    """amp_update_scale_cuda_kernel (torch 1.13), in torch tensor arithmetic."""
    if found_inf.item():
        scale.copy_((scale.to(F64) * backoff_factor).to(F32))
        tracker.fill_(0)
    else:
        successful = int(tracker.item()) + 1
        if successful == interval:
            scale.copy_((scale.to(F64) * growth_factor).to(F32))
            tracker.fill_(0)
        else:
            tracker.fill_(successful)


UPDATE_METHOD = None


def update_scale(scale, tracker, found_inf, growth_factor, backoff_factor, interval):
    global UPDATE_METHOD
    if UPDATE_METHOD is None or UPDATE_METHOD.startswith("torch"):
        try:
            torch._amp_update_scale_(scale, tracker, found_inf, growth_factor, backoff_factor,
                                     interval)
            UPDATE_METHOD = "torch._amp_update_scale_ on " + str(scale.device)
            return
        except (RuntimeError, NotImplementedError):
            if UPDATE_METHOD is not None:
                raise
            UPDATE_METHOD = ("replica of amp_update_scale_cuda_kernel (torch 1.13 has no "
                             "CPU kernel for _amp_update_scale_ on " + str(scale.device) + ")")
    update_scale_replica(scale, tracker, found_inf, growth_factor, backoff_factor, interval)


def run_trace(name, steps, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
              growth_interval=2000):
    dev = device()
    # GradScaler._lazy_init_scale_growth_tracker
    scale = torch.full((1,), init_scale, dtype=F32, device=dev)
    tracker = torch.full((1,), 0, dtype=torch.int32, device=dev)
    expected = []
    for step in steps:
        if isinstance(step, dict):
            scale.fill_(step["set"])  # GradScaler.update(new_scale) with a float
        else:
            found_inf = torch.full((1,), 1.0 if step == "inf" else 0.0, dtype=F32, device=dev)
            update_scale(scale, tracker, found_inf, growth_factor, backoff_factor,
                         growth_interval)
        expected.append([u32(bits32(scale.cpu())[0]), int(tracker.item())])
    return {
        "name": name,
        "init_scale": init_scale,
        "growth_factor": growth_factor,
        "backoff_factor": backoff_factor,
        "growth_interval": growth_interval,
        "steps": [s if isinstance(s, str) else {"set": u64(bits64(torch.tensor([s["set"]],
                                                                             dtype=F64))[0])}
                  for s in steps],
        "expected": expected,
    }


def pattern(spec):
    """'3i 2000c i' -> ['inf'] * 3 + ['clean'] * 2000 + ['inf']."""
    out = []
    for tok in spec.split():
        n, kind = (int(tok[:-1]) if tok[:-1] else 1), tok[-1]
        out += [{"i": "inf", "c": "clean"}[kind]] * n
    return out


def traces():
    t = []
    # Defaults: backoffs while calibrating, growth after 2000 clean steps, a backoff one
    # step before growth (the tracker restarts), several growths in a row.
    t.append(run_trace("defaults", pattern("3i 2000c i 1999c i 2000c 2000c 2i 2001c")))
    # growth_interval = 3.
    t.append(run_trace("interval3", pattern("c c c i c c i i c c c c c c c 5i c c c c"),
                       growth_interval=3))
    t.append(run_trace("interval3_alternating", pattern("c c i " * 10 + "c c c " * 5),
                       growth_interval=3))
    # growth_interval = 1: every clean step grows.
    t.append(run_trace("interval1", pattern("5c i 3c"), growth_interval=1))
    # Factors and an initial scale that are not float32 values: every update rounds.
    t.append(run_trace("inexact_factors", pattern("c c c i c c c c c c i i c c c c c c c c c"),
                       init_scale=1000.3, growth_factor=1.1, backoff_factor=0.3,
                       growth_interval=3))
    t.append(run_trace("inexact_factors_long", pattern("2000c i 4000c 7i 3000c"),
                       init_scale=3.0, growth_factor=1.0001, backoff_factor=0.9999,
                       growth_interval=2))
    # Growth past float32's max: torch 1.13 stores inf, and a backoff keeps it inf.
    t.append(run_trace("grow_to_inf", pattern("c c c i c"), init_scale=2.0**126,
                       growth_interval=1))
    # Backoff into the subnormals and down to zero.
    t.append(run_trace("backoff_to_zero", pattern("30i c"), init_scale=2.0**-130))
    # update(new_scale) between steps: the tracker is left alone.
    steps = pattern("c c") + [{"set": 3.0}] + pattern("c") + [{"set": 0.1}] + pattern("c c i")
    t.append(run_trace("set_scale", steps, growth_interval=4))
    return t


def set_scale_cases():
    out = []
    for v in [3.0, 0.1, 1e-50, 2.0**-149, 3.4028234663852886e38, 3.4028235e38, 1e39,
              -1e39, float("inf"), -2.0]:
        scale = torch.full((1,), 2.0**16, dtype=F32)
        try:
            scale.fill_(v)
            got = u32(bits32(scale)[0])
        except RuntimeError:  # "value cannot be converted to type float without overflow"
            got = None
        out.append({"value": u64(bits64(torch.tensor([v], dtype=F64))[0]), "scale": got})
    return out


# ---- _amp_foreach_non_finite_check_and_unscale_ ----------------------------------------


def unscale_replica(grads, found_inf, inv_scale):
    inv = inv_scale.item()  # a float32 value, exact as a Python float
    for g in grads:
        if not bool(torch.isfinite(g.to(F32)).all()):  # isfinite_ensure_cuda_math(float)
            found_inf.fill_(1.0)
        if inv != 1.0:
            g.mul_(inv_scale.to(g.dtype))  # float: float32 * float32; double: double * double


UNSCALE_METHOD = None


def unscale(grads, found_inf, inv_scale):
    global UNSCALE_METHOD
    if UNSCALE_METHOD is None or UNSCALE_METHOD.startswith("torch"):
        try:
            torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
            UNSCALE_METHOD = "torch._amp_foreach_non_finite_check_and_unscale_ on " + str(
                found_inf.device)
            return
        except (RuntimeError, NotImplementedError):
            if UNSCALE_METHOD is not None:
                raise
            UNSCALE_METHOD = ("replica of _amp_foreach_non_finite_check_and_unscale_cuda_ "
                              "(torch 1.13 has no CPU kernel on " + str(found_inf.device) + ")")
    unscale_replica(grads, found_inf, inv_scale)


def unscale_case(name, scale_value, dtype, arrays):
    dev = device()
    scale = torch.full((1,), scale_value, dtype=F32, device=dev)
    inv_scale = scale.double().reciprocal().float()  # GradScaler.unscale_
    found_inf = torch.full((1,), 0.0, dtype=F32, device=dev)
    grads = [torch.tensor(a, dtype=dtype, device=dev) for a in arrays]
    before = [bits32(g.cpu()) if dtype == F32 else bits64(g.cpu()) for g in grads]
    unscale(grads, found_inf, inv_scale)
    after = [bits32(g.cpu()) if dtype == F32 else bits64(g.cpu()) for g in grads]
    conv = u32 if dtype == F32 else u64
    return {
        "name": name,
        "scale": u32(bits32(scale.cpu())[0]),
        "dtype": "float32" if dtype == F32 else "float64",
        "grads": [[conv(v) for v in g] for g in before],
        "expected": [[conv(v) for v in g] for g in after],
        "found_inf": bool(found_inf.item()),
    }


def unscale_cases():
    inf, nan = float("inf"), float("nan")
    gen = torch.Generator().manual_seed(1234)
    noise32 = (torch.randn(257, generator=gen) * 1e4).tolist()
    noise64 = (torch.randn(257, generator=gen, dtype=F64) * 1e4).tolist()
    edge = [1.0, -2.5, 3.0, 65504.0, 1e-40, -2.0**-149, 2.0**-126, 3.4028234663852886e38,
            -3.0e38, 0.0, -0.0, 7.0, 0.1, 12345.678]
    c = []
    c.append(unscale_case("clean_pow2", 2.0**16, F32, [edge, noise32]))
    c.append(unscale_case("inf_in_second", 2.0**16, F32, [edge, [1.0, inf, 2.0], noise32]))
    c.append(unscale_case("neg_inf", 2.0**16, F32, [[-inf, 4.0]]))
    c.append(unscale_case("nan", 2.0**16, F32, [[3.0, nan, 5.0]]))
    # Not a power of two: inv_scale = float(1/3), and the product is rounded in float32.
    c.append(unscale_case("scale3", 3.0, F32, [edge, noise32]))
    c.append(unscale_case("scale_inexact", 1000.3, F32, [edge, noise32]))
    # inv_scale == 1: gradients untouched.
    c.append(unscale_case("scale1", 1.0, F32, [edge]))
    # A small scale: finite gradients overflow when unscaled, and found_inf stays false
    # (the check looks at the gradients before the multiplication).
    c.append(unscale_case("overflow_after_unscale", 2.0**-20, F32, [[3e38, -1e38, 1.0]]))
    # Subnormal results.
    c.append(unscale_case("subnormal_results", 2.0**24, F32, [[1e-30, -3e-38, 2.0**-100]]))
    # float64 gradients: double arithmetic, but the check is on (float)g, so a finite
    # double beyond float32's range counts as inf.
    c.append(unscale_case("double_clean", 3.0, F64, [edge + [1e-310, 1e-300], noise64]))
    c.append(unscale_case("double_beyond_float", 2.0**16, F64, [[1.0, 1e300, 2.0]]))
    c.append(unscale_case("double_nan", 2.0**16, F64, [[nan, 1.0]]))
    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    doc = {
        "torch_version": torch.__version__,
        "traces": traces(),
        "set_scale": set_scale_cases(),
        "unscale": unscale_cases(),
    }
    doc["update_method"] = UPDATE_METHOD
    doc["unscale_method"] = UNSCALE_METHOD
    with open(args.out, "w") as f:
        json.dump(doc, f)
    print("grad_scaler_trace: %d traces, %d unscale cases; update: %s; unscale: %s"
          % (len(doc["traces"]), len(doc["unscale"]), UPDATE_METHOD, UNSCALE_METHOD))
    return 0


if __name__ == "__main__":
    sys.exit(main())
