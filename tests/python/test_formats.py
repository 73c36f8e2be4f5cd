"""fpguard.finfo / iinfo / formats against torch.finfo / torch.iinfo, numpy.finfo /
numpy.iinfo, and the CLI's `fpguard finfo --json` (the same C++ table)."""
import subprocess
import sys

import numpy as np
import pytest
import torch

import fpguard

TORCH_ATTRS = ["bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"]
# Every floating-point dtype this torch has (float8 types exist from torch 2.1 on).
TORCH_FLOATS = [getattr(torch, n) for n in (
    "float16", "bfloat16", "float32", "float64", "complex32", "complex64", "complex128",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu")
    if hasattr(torch, n)]
TORCH_INTS = [getattr(torch, n) for n in (
    "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64") if hasattr(torch, n)]


@pytest.mark.parametrize("dtype", TORCH_FLOATS, ids=str)
def test_finfo_matches_torch(dtype):
    ours, theirs = fpguard.finfo(dtype), torch.finfo(dtype)
    for attr in TORCH_ATTRS:
        assert getattr(ours, attr) == getattr(theirs, attr), attr
        assert type(getattr(ours, attr)) is type(getattr(theirs, attr)), attr
    assert repr(ours) == repr(theirs)
    assert str(ours) == str(theirs)


@pytest.mark.parametrize("dtype", TORCH_INTS, ids=str)
def test_iinfo_matches_torch(dtype):
    ours, theirs = fpguard.iinfo(dtype), torch.iinfo(dtype)
    for attr in ("bits", "min", "max", "dtype"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
        assert type(getattr(ours, attr)) is type(getattr(theirs, attr)), attr
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.complex64])
def test_finfo_matches_numpy(dtype):
    ours, theirs = fpguard.finfo(np.dtype(dtype)), np.finfo(dtype)
    assert fpguard.finfo(dtype) == ours  # the scalar type as well as the dtype
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "smallest_subnormal",
                 "maxexp", "minexp", "nexp", "nmant", "precision"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert ours.dtype == theirs.dtype.name


@pytest.mark.parametrize("name", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                                  "uint64"])
def test_iinfo_matches_numpy(name):
    ours, theirs = fpguard.iinfo(np.dtype(name)), np.iinfo(name)
    for attr in ("bits", "min", "max", "kind"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert ours == fpguard.iinfo(name) == fpguard.iinfo(getattr(np, name))


def test_every_name_as_the_cli(cli):
    """Every name and alias the CLI takes gives the CLI's numbers, field by field."""
    names = fpguard.format_names() + ["e5m7", "E3M2FNUZ", "e11m10"]
    assert {"float16", "fp16", "half", "bf16", "fp8_e4m3fn", "e4m3", "fp4"} <= set(names)
    for name, j in zip(names, cli.json("finfo", *names)):
        ours = fpguard.finfo(name)
        for key, value in j.items():
            assert getattr(ours, key) == value, (name, key)


def test_formats_is_the_table(cli):
    table = fpguard.formats()
    assert [f.dtype for f in table] == [j["dtype"] for j in cli.json("finfo", "--all")]
    assert all(isinstance(f, fpguard.finfo) for f in table)
    assert fpguard.finfo("float8_e4m3fn").max == 448.0  # OCP OFP8: an independent number
    assert fpguard.finfo("float8_e8m0fnu").min == 2.0**-127
    assert [i.dtype for i in fpguard.integer_types()] == [
        j["dtype"] for j in cli.json("iinfo", "--all")]


def test_a_finfo_is_a_format():
    f = fpguard.finfo("bf16")
    assert fpguard.finfo(f) == f and f.dtype == "bfloat16"
    assert fpguard.finfo(torch.bfloat16) == f and hash(fpguard.finfo("bfloat16")) == hash(f)
    assert fpguard.finfo("float16") != f


def test_torch_is_not_imported():
    """fpguard never imports torch itself (it is slow to import and optional)."""
    code = ("import sys, numpy, fpguard; fpguard.finfo('float16'); fpguard.iinfo(numpy.int8);"
            "fpguard.round(numpy.ones(4, numpy.float32), numpy.float16);"
            "assert 'torch' not in sys.modules, 'torch imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
