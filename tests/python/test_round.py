"""fpguard.round / encode / decode: float16 and bfloat16 bit for bit against torch (every
16-bit pattern, the halfway points between them and their neighbours, random and edge
float32), float64 against NumPy's correctly rounded astype, every other format against
the CLI's `fpguard round` on the same data, and zero copy."""

import numpy as np
import pytest
import torch

import fpguard
from conftest import assert_gil_released, peak_allocation
from fpguard import _fpguard

F32_EDGES = np.array([
    0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, np.finfo(np.float32).max,
    -np.finfo(np.float32).max, np.finfo(np.float32).tiny, np.float32(2.0**-149), 1.0, -1.0,
    65504.0, 65519.996, 65520.0, -65520.0, 2.0**-24, 2.0**-25, 3 * 2.0**-26, 2.0**-14,
    3.3895313892515355e38, 3.3961775292304744e38, 1 + 2.0**-8, 1 + 3 * 2.0**-9,
    448.0, 464.0, 480.0, 57344.0, 61440.0, 6.0, 7.0, 0.25, 0.75, 2.0**-127, 2.0**127,
], dtype=np.float32)


def bits(x):
    return x.view(np.uint32 if x.dtype == np.float32 else np.uint64)


def assert_same(ours, ref, what):
    """Bit for bit, except that any NaN matches any NaN (torch keeps payloads)."""
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(ours), nan), what
    bad = np.flatnonzero((bits(ours) != bits(ref)) & ~nan)
    assert bad.size == 0, f"{what}: {bad.size} differ, first x[{bad[0]}]: {ours[bad[0]]!r} " \
                          f"vs {ref[bad[0]]!r}"


def neighbourhood(values):
    """`values` (float32), the halfway points between consecutive ones and the float32
    numbers either side of each: every rounding decision of the format they come from."""
    v = np.unique(values[np.isfinite(values)].astype(np.float64))
    mid = ((v[:-1] + v[1:]) / 2).astype(np.float32)  # exact: 12 significant bits at most
    up = np.nextafter(mid, np.float32(np.inf))
    down = np.nextafter(mid, np.float32(-np.inf))
    return np.concatenate([values, mid, up, down, -mid, -up, -down])


def random_f32(n, seed):
    rng = np.random.default_rng(seed)
    patterns = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    scaled = (rng.standard_normal(n) * 10.0 ** rng.integers(-9, 6, n)).astype(np.float32)
    return np.concatenate([F32_EDGES, patterns, scaled])


ALL16 = np.arange(2**16, dtype=np.uint32)
TORCH_CASTS = {
    "float16": (ALL16.astype(np.uint16).view(np.float16).astype(np.float32), torch.Tensor.half),
    "bfloat16": ((ALL16 << 16).view(np.float32), torch.Tensor.bfloat16),
}


@pytest.mark.parametrize("fmt", TORCH_CASTS)
def test_round_matches_torch(fmt):
    patterns, cast = TORCH_CASTS[fmt]
    x = np.concatenate([neighbourhood(patterns), random_f32(1 << 16, seed=1)])
    ref = cast(torch.from_numpy(x)).float().numpy()
    ours = fpguard.round(x, fmt)
    assert ours.dtype == np.float32 and ours.shape == x.shape
    assert_same(ours, ref, fmt)
    # The 16-bit values themselves come back unchanged (NaN aside).
    assert_same(fpguard.round(patterns, fmt), patterns, f"{fmt} patterns")
    # A torch tensor in, a torch tensor out, with the same values.
    t = fpguard.round(torch.from_numpy(x), fmt)
    assert isinstance(t, torch.Tensor) and t.dtype == torch.float32
    assert_same(t.numpy(), ref, f"{fmt} via torch")
    # encode gives torch's bit patterns; decode gives the values back.
    codes = fpguard.encode(x, fmt)
    ref_codes = cast(torch.from_numpy(x)).view(torch.int16).numpy().view(np.uint16)
    finite = ~np.isnan(x)
    assert codes.dtype == np.uint16
    assert np.array_equal(codes[finite], ref_codes[finite])
    assert_same(fpguard.decode(codes, fmt).astype(np.float32), ref, f"{fmt} decode")
    tcodes = fpguard.encode(torch.from_numpy(x), fmt)
    assert tcodes.dtype == torch.int16 and np.array_equal(tcodes.numpy().view(np.uint16), codes)


def test_float64_matches_numpy():
    """float64 in, float64 out, rounded once (NumPy's float64 -> float16 is correctly
    rounded; torch's goes through float32)."""
    rng = np.random.default_rng(2)
    x16 = np.arange(2**16, dtype=np.uint16).view(np.float16)
    v = np.unique(x16[np.isfinite(x16)].astype(np.float64))
    mid = (v[:-1] + v[1:]) / 2
    # Just off the halfway points by less than a float32 ulp: rounding through float32
    # first would land on the halfway point and round to even, wrongly.
    x = np.concatenate([mid, mid + np.abs(mid) * 2.0**-40, mid - np.abs(mid) * 2.0**-40,
                        rng.standard_normal(4096) * 1e3, F32_EDGES.astype(np.float64)])
    ours = fpguard.round(x, "float16")
    assert ours.dtype == np.float64
    with np.errstate(over="ignore"):
        ref = x.astype(np.float16).astype(np.float64)
    assert_same(ours, ref, "float64 -> float16")


FP_FORMATS = ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
              "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e8m0fnu", "e5m7", "tf32"]
# (input dtype, options, --encode): every option once, both dtypes, both outputs.
CASES = [
    ("float32", dict(), False),
    ("float32", dict(saturate=True), True),
    ("float32", dict(rounding="toward-zero", flush_subnormals=True), False),
    ("float32", dict(rounding="stochastic", seed=11), False),
    ("float64", dict(rounding="up", saturate=True), True),
    ("float64", dict(rounding="stochastic", seed=11), False),
]


def cli_flags(o):
    flags = ["--rounding", o.get("rounding", "nearest-even"), "--seed", str(o.get("seed", 0))]
    return flags + ["--saturate"] * o.get("saturate", False) + \
        ["--flush-subnormals"] * o.get("flush_subnormals", False)


@pytest.mark.parametrize("fmt", FP_FORMATS)
def test_round_matches_cli(fmt, cli, tmp_path):
    """Every other format against `fpguard round` on the same .npy."""
    n = fpguard.finfo(fmt).bits
    codes = np.arange(2**n) if n <= 12 else np.random.default_rng(6).integers(0, 2**n, 4096)
    values = fpguard.decode(codes, fmt).astype(np.float32)  # exact: all fit in float32
    x32 = np.concatenate([neighbourhood(values), random_f32(2048, seed=3)])
    with np.errstate(invalid="ignore"):
        inputs = {"float32": x32, "float64": x32.astype(np.float64) * (1 + 2.0**-30)}
    for dtype, x in inputs.items():
        np.save(tmp_path / f"{dtype}.npy", x)
    for dtype, o, encode in CASES:
        x, dst = inputs[dtype], tmp_path / "y.npy"
        cli("round", fmt, str(tmp_path / f"{dtype}.npy"), "-o", str(dst), *cli_flags(o),
            *(["--encode"] if encode else []))
        ref = np.load(dst)
        what = f"{fmt} {dtype} {o} encode={encode}"
        if encode:
            ours = fpguard.encode(x, fmt, **o)
            assert ours.dtype == ref.dtype and np.array_equal(ours, ref), what
        else:
            assert_same(fpguard.round(x, fmt, **o), ref, what)


def test_out_in_place():
    rng = np.random.default_rng(4)
    base = rng.standard_normal(1002).astype(np.float32) * 100
    a = base[1:-1]  # contiguous, inside a larger buffer
    expect = fpguard.round(a.copy(), "bfloat16")
    guard = base[[0, -1]].copy()
    r = fpguard.round(a, "bfloat16", out=a)
    assert r is a and np.shares_memory(r, base)
    assert_same(a, expect, "out=a")
    assert np.array_equal(base[[0, -1]], guard)  # nothing outside the view written
    b = np.empty_like(a)
    assert fpguard.round(base[1:-1], "float16", out=b) is b
    # Overlapping input and output (a shifted view of the same buffer) still round the
    # input as it was.
    c = rng.standard_normal(1000)
    expect = fpguard.round(c[:-1].copy(), "float16")
    fpguard.round(c[:-1], "float16", out=c[1:])
    assert_same(c[1:], expect, "overlapping out")


def test_torch_in_place():
    t = torch.linspace(-3, 3, 1001)
    expect = t.half().float()
    r = fpguard.round(t, torch.float16, out=t)
    assert r is t and torch.equal(t, expect)
    p = torch.nn.Parameter(torch.linspace(-3, 3, 101))
    assert fpguard.round(p, "bf16", out=p) is p
    assert torch.equal(p.detach(), torch.linspace(-3, 3, 101).bfloat16().float())
    u = torch.linspace(-3, 3, 64)
    v = fpguard.round(u, "float16")
    assert isinstance(v, torch.Tensor) and v.data_ptr() != u.data_ptr()


def test_no_copy_of_contiguous_input():
    """NumPy reports its allocations to tracemalloc: rounding a contiguous 4 MiB array
    into `out` allocates nothing of that size, and without `out` only the result; a
    strided input is copied, which shows that the measurement sees copies."""
    a = np.random.default_rng(5).standard_normal(1 << 20).astype(np.float32)
    b = np.empty_like(a)
    fpguard.round(a, "float16", out=b)  # warm-up (first-call allocations)
    peak = peak_allocation
    assert peak(lambda: fpguard.round(a, "float16", out=b)) < 64 << 10
    assert peak(lambda: fpguard.round(a, "float16", out=a)) < 64 << 10
    assert peak(lambda: fpguard.round(a, "float16")) < a.nbytes + (64 << 10)
    assert peak(lambda: fpguard.round(a[::2], "float16")) >= a.nbytes


def test_gil_released_while_rounding():
    a = np.random.default_rng(7).standard_normal(1 << 21).astype(np.float32)
    b = np.empty_like(a)
    assert_gil_released(
        lambda: _fpguard.round(a, "float8_e4m3fn", "stochastic", False, False, 0, b), "round")


def test_multidimensional_and_empty():
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 7
    r = fpguard.round(x, "float16")
    assert r.shape == (2, 3, 4)
    assert_same(r.ravel(), (x.ravel().astype(np.float16)).astype(np.float64), "3-d")
    r = fpguard.round(np.asfortranarray(x), "float16")  # strided input: read through a copy
    assert_same(r.ravel(), (x.ravel().astype(np.float16)).astype(np.float64), "fortran")
    assert fpguard.round(np.zeros((0, 3), np.float32), "fp8_e4m3fn").shape == (0, 3)
    assert fpguard.round([1.0, 1 + 2.0**-12], "float16").tolist() == [1.0, 1.0]



class DLPackOnly:
    """An array known only through the DLPack protocol (as a JAX or CuPy CPU array is)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_dlpack_without_a_copy():
    """round and stats read an object with __dlpack__ where its memory is (tracemalloc sees
    NumPy's allocations: a copy of 4 MiB would show); a torch tensor is written in place."""
    x = random_f32(1 << 20, 5)
    d, y = DLPackOnly(x), np.empty_like(x)
    fpguard.round(d, "float16", out=y)  # warm-up
    assert peak_allocation(lambda: fpguard.round(d, "float16", out=y)) < 64 << 10
    with np.errstate(over="ignore"):
        assert_same(y, x.astype(np.float16).astype(np.float32), "DLPack")
    assert peak_allocation(lambda: fpguard.stats(d, threads=1)) < 64 << 10
    assert fpguard.stats(d).to_dict() == fpguard.stats(x).to_dict()
    assert_same(fpguard.round(DLPackOnly(torch.from_numpy(x)), "float16"), y, "torch DLPack")
    t = torch.from_numpy(x.copy())
    ptr = t.data_ptr()
    assert fpguard.round(t, "bfloat16", out=t) is t and t.data_ptr() == ptr
    assert_same(t.numpy(), torch.from_numpy(x).bfloat16().float().numpy(), "in place")
