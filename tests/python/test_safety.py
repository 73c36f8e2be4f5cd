"""fpguard.safe_divide / safe_rsqrt against NumPy on edge values (the conventions of
docs/safety.md written out in NumPy), in both carriers, with and without a format."""
import numpy as np
import pytest
import torch

import fpguard
from conftest import assert_gil_released, peak_allocation
from test_errors import error_of

EDGES = [0.0, -0.0, 1.0, -1.0, 3.0, 1e-30, -1e-30, 1e-45, -1e-45, 2.0**-126, 2.0**-14,
         -2.0**-15, 6e-5, 65504.0, 1e30, -1e38, np.inf, -np.inf, np.nan, 0.1, 7.0]


def same(ours, ref):
    """Bit for bit, any NaN matching any NaN."""
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(ours), nan)
    assert np.array_equal(ours[~nan], ref[~nan]) and \
        np.array_equal(np.signbit(ours[~nan]), np.signbit(ref[~nan]))


def eps_of(dtype, eps_scale, fmt):
    tiny = fpguard.finfo(fmt).tiny if fmt else np.finfo(dtype).tiny
    return dtype(eps_scale * tiny)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("eps_scale,fmt", [(1.0, None), (4.0, None), (1.0, "float16"),
                                           (0.5, "bfloat16")])
def test_safe_divide_against_numpy(dtype, eps_scale, fmt):
    e = np.array(EDGES, dtype)
    a, b = np.repeat(e, e.size), np.tile(e, e.size)  # every pair
    eps = eps_of(dtype, eps_scale, fmt)
    with np.errstate(all="ignore"):
        want = a / np.copysign(np.maximum(np.abs(b), eps), b)
    same(fpguard.safe_divide(a, b, eps_scale=eps_scale, fmt=fmt), want)
    out = a.copy()
    assert fpguard.safe_divide(out, b, eps_scale, fmt, out=out) is out  # in place
    same(out, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("eps_scale,fmt", [(1.0, None), (3.0, None), (1.0, "float16")])
def test_safe_rsqrt_against_numpy(dtype, eps_scale, fmt):
    x = np.array(EDGES, dtype)
    eps = eps_of(dtype, eps_scale, fmt)
    with np.errstate(all="ignore"):
        want = dtype(1) / np.sqrt(np.maximum(x, eps))
    want[x < 0] = np.nan
    same(fpguard.safe_rsqrt(x, eps_scale=eps_scale, fmt=fmt), want)
    t = torch.from_numpy(x.copy())
    got = fpguard.safe_rsqrt(t, eps_scale=eps_scale, fmt=fmt, out=t)
    assert got is t
    same(t.numpy(), want)


def test_bad_arguments():
    a = np.ones(3, np.float32)
    assert error_of(fpguard.safe_divide, a, np.ones(3)) == \
        "b: dtype float64 differs from a's float32"
    assert error_of(fpguard.safe_divide, a, np.ones(4, np.float32)) == \
        "b: shape (4,) differs from a's (3,) (safe_divide does not broadcast)"
    assert error_of(fpguard.safe_divide, a, np.ones(3, np.int32)) == \
        "b: dtype int32 is not supported by safe_divide (float32 or float64 only)"
    assert error_of(fpguard.safe_rsqrt, np.ones(3, np.int8)) == \
        "x: dtype int8 is not supported by safe_rsqrt (float32 or float64 only)"
    assert "eps_scale must be finite and > 0" in error_of(fpguard.safe_rsqrt, a, eps_scale=0)
    assert "eps_scale must be finite and > 0" in error_of(fpguard.safe_divide, a, a,
                                                          eps_scale=-1)
    out = np.full(6, 7, np.float32)[::2]
    assert error_of(fpguard.safe_rsqrt, a, out=out).startswith(
        "out: not a C-contiguous array: safe_rsqrt writes its result in place")
    assert error_of(fpguard.safe_divide, a, a, fmt="flaot16") == \
        "format 'flaot16': unknown format; did you mean 'float16'?"


def test_no_copy_and_gil_released():
    a = np.random.default_rng(11).standard_normal(1 << 20).astype(np.float32)
    b, out = a[::-1].copy(), np.empty_like(a)
    fpguard.safe_divide(a, b, out=out)  # warm-up
    assert peak_allocation(lambda: fpguard.safe_divide(a, b, out=out)) < 64 << 10
    assert peak_allocation(lambda: fpguard.safe_rsqrt(a, out=a)) < 64 << 10
    assert peak_allocation(lambda: fpguard.safe_rsqrt(b[::2])) >= a.nbytes // 2
    big = np.tile(a, 8)
    assert_gil_released(lambda: fpguard.safe_divide(big, big, out=big), "safe_divide")
