"""fpguard.stats: the counts and extremes against NumPy (float16 by NumPy's correctly
rounded astype, bfloat16 by torch's), and the whole object against `fpguard inspect
--json` on the same .npy file, for several dtypes and the degenerate tensors."""
import collections
import math

import numpy as np
import pytest
import torch

import fpguard
from conftest import assert_gil_released, peak_allocation
from test_errors import error_of

FORMATS = ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"]


def sample(n=5000, seed=3):
    """float32 data that overflows float16, underflows it, lands in its subnormals, and
    holds NaN, infinities and zeros."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 18, n))).astype(np.float32)
    x[:12] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 65519.99, 65520.0, -1e5, 2.0**-25,
              3 * 2.0**-26, 1e-6, -2.0**-15]
    return x


def rounded(x, fmt):
    """x (finite float32) rounded to nearest-even by an independent implementation."""
    if fmt == "float16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16).astype(np.float64)
    return torch.from_numpy(x).bfloat16().double().numpy()


@pytest.mark.parametrize("fmt,tiny,fmax,p", [("float16", 2.0**-14, 65504.0, 11),
                                             ("bfloat16", 2.0**-126, 3.3895313892515355e38, 8)])
def test_against_numpy(fmt, tiny, fmax, p):
    x = sample()
    s = fpguard.stats(x, formats=[fmt], margin=0.25)
    fin = x[np.isfinite(x)].astype(np.float64)
    assert (s.count, s.nan, s.posinf, s.neginf) == (x.size, 1, 1, 1)
    assert s.zeros == np.count_nonzero(x == 0)
    assert (s.min, s.max, s.absmax) == (fin.min(), fin.max(), np.abs(fin).max())
    assert s.min_abs_nonzero == np.abs(fin[fin != 0]).min()
    # Summation order differs: the mean and std agree to a few ulps of float64.
    assert math.isclose(s.mean, fin.mean(), rel_tol=1e-12)
    assert math.isclose(s.std, fin.std(), rel_tol=1e-12)
    nz = fin[fin != 0]
    want_hist = collections.Counter((np.frexp(nz)[1] - 1).tolist())
    assert s.exponent_histogram == dict(want_hist)

    f = s.formats[fmt]
    r = rounded(x[np.isfinite(x)], fmt)
    assert f.format == fmt
    assert f.overflow == np.count_nonzero(np.isinf(r))
    assert f.underflow == np.count_nonzero((r == 0) & (fin != 0))
    assert f.subnormal == np.count_nonzero((r != 0) & (np.abs(r) < tiny))
    ok = np.isfinite(r)
    assert f.max_abs_error == np.abs(r[ok] - fin[ok]).max()
    keep = ok & (fin != 0)
    rel = np.abs(r[keep] - fin[keep]) / np.abs(fin[keep])
    assert f.max_rel_error == pytest.approx(rel.max(), rel=2.0**-23)  # a float32 quotient
    assert f.precision_loss == np.count_nonzero(rel > 2.0**(-p / 2))
    assert f.headroom_bits == math.log2(fmax / np.abs(fin).max())
    k = math.floor(math.log2(0.25 * fmax / np.abs(fin).max()))
    assert f.scale == 2.0**k and np.abs(fin).max() * 2.0**k <= 0.25 * fmax
    assert np.abs(fin).max() * 2.0**(k + 1) > 0.25 * fmax
    assert f.verdict == "nonfinite"
    clean = fpguard.stats(np.float32([1.0, 2.0, 3.0, 70000.0]), formats=[fmt])
    assert clean.formats[fmt].verdict == ("overflow" if fmt == "float16" else "ok")


CASES = {
    "float32": lambda: sample(),
    "float64": lambda: sample().astype(np.float64) * 1e10,
    "float16": lambda: np.float16([1, -2.5, 0, np.inf, 6e-8, 65504]),
    "int32": lambda: np.arange(-50, 70000, 7, dtype=np.int32).reshape(2, -1),
    "uint8": lambda: np.arange(256, dtype=np.uint8),
    "bool": lambda: np.array([True, False, True]),
    "zeros": lambda: np.zeros((3, 4), np.float32),
    "nan_only": lambda: np.full(5, np.nan, np.float32),
    "empty": lambda: np.zeros(0, np.float32),
    "strided": lambda: sample()[::3],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_as_inspect_json(cli, tmp_path, case):
    x = CASES[case]()
    path = tmp_path / f"{case}.npy"
    np.save(path, x)
    fmts = ",".join(FORMATS)
    want = cli.json("inspect", str(path), "--formats", fmts, "--margin", "0.25")["tensors"]
    got = fpguard.stats(x, formats=FORMATS, margin=0.25, name=case)
    assert got.to_dict() == want[0]
    # The attributes are the dict's fields (null in JSON: NaN or inf as attributes).
    d = got.to_dict()
    for key, value in d.items():
        if key == "formats":
            for name, fd in value.items():
                for k, v in fd.items():
                    attr = getattr(got.formats[name], k)
                    assert attr == v or (v is None and not math.isfinite(attr)), (name, k)
        elif key == "exponent_histogram":
            assert {str(e): c for e, c in got.exponent_histogram.items()} == value
        elif key == "shape":
            assert list(got.shape) == value
        else:
            attr = getattr(got, key)
            assert attr == value or (value is None and math.isnan(attr)), key


def test_defaults_and_torch():
    x = sample()
    path_default = fpguard.stats(x)
    assert list(path_default.formats) == ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"]
    assert path_default.name == "tensor" and path_default.dtype == "float32"
    t = torch.from_numpy(x)
    assert fpguard.stats(t).to_dict() == path_default.to_dict()
    # bfloat16 values are float32 values: the same statistics, under their own dtype.
    b = torch.from_numpy(x).bfloat16()
    want = fpguard.stats(b.float(), formats=FORMATS).to_dict()
    got = fpguard.stats(b, formats=FORMATS).to_dict()
    assert got.pop("dtype") == "bfloat16" and want.pop("dtype") == "float32"
    assert got == want
    one = fpguard.stats(x, formats="fp16").formats["float16"]  # one format, by an alias
    assert one.overflow == path_default.formats["float16"].overflow > 0


def test_bad_arguments(cli, tmp_path):
    x = np.ones(4, np.float32)
    assert error_of(fpguard.stats, x, formats=["flaot16"]) == \
        "format 'flaot16': unknown format; did you mean 'float16'?"
    assert error_of(fpguard.stats, x, formats=[]) == "formats: no format given"
    assert error_of(fpguard.stats, x, margin=0) == "margin 0.0: must be in (0, 1]"
    np.save(tmp_path / "x.npy", x)
    cli_msg = cli("inspect", str(tmp_path / "x.npy"), "--margin", "0", check=False).stderr
    assert cli_msg.strip() == "fpguard: error: --margin: must be in (0, 1]"
    assert error_of(fpguard.stats, np.array(["a"])) == \
        "a: dtype <U1 is not supported by stats (float, integer or bool arrays only)"
    assert error_of(fpguard.stats, np.ones(2, np.complex64)).startswith(
        "a: dtype complex64 is not supported by stats")


def test_no_copy_and_gil_released():
    """A contiguous float32 array is scanned where it is (tracemalloc sees NumPy's
    allocations: a strided one is copied, which shows the measurement sees copies), and
    the GIL is released during the scan."""
    a = np.random.default_rng(9).standard_normal(1 << 20).astype(np.float32)
    fpguard.stats(a)  # warm-up
    assert peak_allocation(lambda: fpguard.stats(a, threads=1)) < 64 << 10
    assert peak_allocation(lambda: fpguard.stats(a[::2], threads=1)) >= a.nbytes // 2
    big = np.tile(a, 4)
    assert_gil_released(lambda: fpguard.stats(big, formats=FORMATS, threads=1), "stats")
