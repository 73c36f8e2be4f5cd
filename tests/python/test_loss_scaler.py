"""fpguard.LossScaler replayed against torch's GradScaler (tests/reference/
grad_scaler_trace.py: the real kernels where torch has them, else their replica), and its
state_dict() against GradScaler's load_state_dict()/state_dict()."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import fpguard
from test_errors import error_of

TRACE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference",
                     "grad_scaler_trace.py")


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    out = tmp_path_factory.mktemp("trace") / "trace.json"
    subprocess.run([sys.executable, TRACE, "--out", str(out)], check=True, capture_output=True,
                   timeout=300)
    return json.loads(out.read_text())


def f32_bits(v):
    return int(np.float32(v).view(np.uint32))


def f64(bits):
    return float(np.uint64(bits).view(np.float64))


def test_update_traces(trace):
    assert len(trace["traces"]) >= 9
    for t in trace["traces"]:
        s = fpguard.LossScaler(init_scale=t["init_scale"], growth_factor=t["growth_factor"],
                               backoff_factor=t["backoff_factor"],
                               growth_interval=t["growth_interval"])
        for i, (step, want) in enumerate(zip(t["steps"], t["expected"])):
            if isinstance(step, dict):
                s.update(new_scale=f64(step["set"]))
            else:
                s.update(step == "inf")
            assert [f32_bits(s.get_scale()), s.growth_tracker] == want, (t["name"], i)


def test_set_scale(trace):
    for case in trace["set_scale"]:
        s = fpguard.LossScaler()
        v = f64(case["value"])
        if case["scale"] is None:  # torch refuses it
            assert "does not fit in float32" in error_of(s.update, new_scale=v)
        else:
            s.update(new_scale=v)
            assert f32_bits(s.get_scale()) == case["scale"], v


def test_unscale(trace):
    for case in trace["unscale"]:
        dtype = np.float32 if case["dtype"] == "float32" else np.float64
        bits = np.uint32 if dtype == np.float32 else np.uint64
        scale = float(np.uint32(case["scale"]).view(np.float32))
        grads = [np.array(g, bits).view(dtype) for g in case["grads"]]
        s = fpguard.LossScaler(init_scale=scale)
        # numpy arrays for even cases, torch tensors (unscaled through their views) for odd.
        tensors = [torch.from_numpy(g) for g in grads]
        found = s.unscale_(grads if len(case["name"]) % 2 else tensors)
        assert found == case["found_inf"], case["name"]
        for g, want in zip(grads, case["expected"]):
            assert g.view(bits).tolist() == want, case["name"]


@pytest.fixture
def grad_scaler(monkeypatch):
    """GradScaler(...), enabled on a machine without CUDA: torch disables it there (and its
    state_dict()/load_state_dict() then do nothing), so its CUDA probe is told that CUDA is
    there. The bookkeeping those two methods do is plain Python and CPU tensors."""
    monkeypatch.setattr(torch.cuda.amp.grad_scaler, "amp_definitely_not_available",
                        lambda: False)
    return torch.cuda.amp.GradScaler


def test_state_dict_with_grad_scaler(grad_scaler):
    assert fpguard.LossScaler().state_dict() == grad_scaler().state_dict()
    s = fpguard.LossScaler(init_scale=1024.0, growth_factor=3.0, backoff_factor=0.25,
                           growth_interval=5)
    for found_inf in [False, False, True, False, False]:
        s.update(found_inf)
    d = s.state_dict()
    assert d == {"scale": 256.0, "growth_factor": 3.0, "backoff_factor": 0.25,
                 "growth_interval": 5, "_growth_tracker": 2}
    assert [type(v) for v in d.values()] == [float, float, float, int, int]
    for started in (False, True):
        g = grad_scaler(init_scale=8.0)
        assert g.is_enabled()
        if started:  # what its first scale() does (on CUDA): the state moves into tensors,
            g._lazy_init_scale_growth_tracker(torch.device("cpu"))  # which load_ fills
        g.load_state_dict(d)
        assert g.state_dict() == d
        assert (g.get_scale(), g.get_growth_factor(), g.get_backoff_factor(),
                g.get_growth_interval()) == (256.0, 3.0, 0.25, 5)
    # And back: GradScaler's dict into a fresh LossScaler.
    g = grad_scaler(init_scale=3.0, growth_factor=1.5, backoff_factor=0.75, growth_interval=7)
    t = fpguard.LossScaler()
    t.load_state_dict(g.state_dict())
    assert t.state_dict() == g.state_dict()
    t.load_state_dict(d)
    assert t.state_dict() == d and t.growth_tracker == 2
    for _ in range(3):
        t.update(False)
    assert t.get_scale() == 768.0 and t.growth_tracker == 0


def test_disabled_as_grad_scaler():
    s = fpguard.LossScaler(init_scale=8.0, enabled=False)
    assert s.state_dict() == torch.cuda.amp.GradScaler(enabled=False).state_dict() == {}
    s.load_state_dict({"scale": 2.0})  # ignored, as GradScaler ignores it when disabled
    assert s.get_scale() == 1.0 and not s.is_enabled()
    g = np.float32([2.0, np.inf])
    assert s.unscale_(g) is False and g[0] == 2.0
    assert s.scale(3.0) == 3.0


def test_bad_arguments():
    assert error_of(fpguard.LossScaler, growth_factor=0.5).startswith("LossScaler: ")
    s = fpguard.LossScaler()
    assert error_of(s.load_state_dict, {}).startswith("LossScaler state: the dict is empty")
    assert error_of(s.load_state_dict, {"scale": 2.0}) == \
        "LossScaler state: field 'growth_factor' is missing"
    assert error_of(s.update, 3.0) == "found_inf 3.0: must be True or False"
    assert error_of(s.update).startswith("found_inf: give found_inf")
    assert error_of(s.update, new_scale="x") == "new_scale 'x': must be a number"
    inf = fpguard.LossScaler(init_scale=2.0**127, growth_interval=1)
    inf.update(False)  # grows to inf, as torch 1.13 does
    assert error_of(s.load_state_dict, inf.state_dict()) == \
        "LossScaler state: field 'scale' is inf, which the state (JSON) cannot hold"
    assert error_of(s.unscale_, [np.ones(2, np.float32), np.ones(2, np.int32)]) == \
        "grads[1]: dtype int32 is not supported by unscale_ (float32 or float64 only)"
    assert error_of(s.unscale_, np.ones(4, np.float32)[::2]).startswith(
        "grads: not a C-contiguous array")
    assert s.scale(1.5) == 1.5 * 65536.0
