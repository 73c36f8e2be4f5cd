"""Every failure is an fpguard.Error (a ValueError) with the CLI's one-line message, and
leaves `out` as it was."""
import numpy as np
import pytest
import torch

import fpguard
from conftest import cli_error


def error_of(f, *args, **kwargs):
    with pytest.raises(fpguard.Error) as e:
        f(*args, **kwargs)
    assert isinstance(e.value, ValueError)
    msg = str(e.value)
    assert "\n" not in msg and msg
    return msg


def test_unknown_names_as_the_cli(cli, tmp_path):
    x = tmp_path / "x.npy"
    np.save(x, np.ones(3, np.float32))
    out = str(tmp_path / "y.npy")
    cases = [
        (lambda: fpguard.finfo("flaot16"), ["finfo", "flaot16"]),
        (lambda: fpguard.finfo("e4m3fnuzz"), ["finfo", "e4m3fnuzz"]),
        (lambda: fpguard.finfo("e1m3"), ["finfo", "e1m3"]),  # a malformed custom format
        (lambda: fpguard.finfo("int8"), ["finfo", "int8"]),
        (lambda: fpguard.iinfo("int7"), ["iinfo", "int7"]),
        (lambda: fpguard.round(np.ones(3, np.float32), "bfloat61"),
         ["round", "bfloat61", str(x), "-o", out]),
        (lambda: fpguard.round(np.ones(3, np.float32), "float16", rounding="nearest"),
         ["round", "float16", str(x), "-o", out, "--rounding", "nearest"]),
        (lambda: fpguard.encode(np.ones(3, np.float32), "fp8_e5m2", rounding="upp"),
         ["round", "fp8_e5m2", str(x), "-o", out, "--rounding", "upp", "--encode"]),
    ]
    for f, argv in cases:
        assert error_of(f) == cli_error(cli(*argv, check=False)), argv
    assert "did you mean 'float16'?" in error_of(fpguard.finfo, "flaot16")


def test_wrong_dtype_as_the_cli(cli, tmp_path):
    """The CLI names the file where Python names the argument; the rest is the same."""
    x = tmp_path / "x.npy"
    for dtype in (np.int32, np.float16, np.bool_, np.uint64):
        np.save(x, np.ones(3, dtype))
        want = cli_error(cli("round", "float16", str(x), "-o", str(tmp_path / "y"), check=False))
        assert want.startswith(f"{x}: ")
        got = error_of(fpguard.round, np.ones(3, dtype), "float16")
        assert got == "a: " + want[len(f"{x}: "):]
    assert error_of(fpguard.encode, np.ones(3, np.int8), "float16").startswith(
        "a: dtype int8 is not supported by encode")
    assert error_of(fpguard.round, torch.ones(3, dtype=torch.bfloat16), "float16") == \
        "a: dtype bfloat16 is not supported by round (float32 or float64 only)"
    assert error_of(fpguard.round, torch.ones(3, dtype=torch.int32), "float16") == \
        "a: dtype int32 is not supported by round (float32 or float64 only)"
    assert error_of(fpguard.round, ["a", "b"], "float16") == \
        "a: dtype <U1 is not supported by round (float32 or float64 only)"


def test_bad_out_is_untouched():
    a = np.linspace(-1, 1, 8, dtype=np.float32)
    cases = {
        "not a C-contiguous array": np.full(16, 7, np.float32)[::2],
        "differs from the input's float32": np.full(8, 7, np.float64),
        "shape (4, 2) differs from the input's (8,)": np.full((4, 2), 7, np.float32),
        "is not a numpy.ndarray or torch.Tensor": [7.0] * 8,
    }
    for needle, out in cases.items():
        before = np.array(out, copy=True)
        msg = error_of(fpguard.round, a, "float16", out=out)
        assert msg.startswith("out: ") and needle in msg, msg
        assert np.array_equal(np.asarray(out), before)
    ro = np.full(8, 7, np.float32)
    ro.flags.writeable = False
    assert error_of(fpguard.round, a, "float16", out=ro) == "out: the array is read-only"
    # An error in the options leaves a good out untouched too.
    out = np.full(8, 7, np.float32)
    error_of(fpguard.round, a, "float16", rounding="sideways", out=out)
    error_of(fpguard.round, a, "flaot16", out=out)
    assert (out == 7).all()
    # In place into a strided view is refused (a strided input alone is fine).
    s = np.linspace(-1, 1, 16, dtype=np.float32)[::2]
    assert "not a C-contiguous array" in error_of(fpguard.round, s, "float16", out=s)


def test_other_bad_arguments():
    assert error_of(fpguard.finfo, 3) == "format 3: not a name, numpy.dtype or torch.dtype"
    assert error_of(fpguard.finfo, None).startswith("format None: ")
    assert error_of(fpguard.iinfo, torch.bool).startswith("integer type 'bool': unknown")
    assert error_of(fpguard.round, np.ones(2), "fp16", seed=-1) == \
        "seed -1: not an integer from 0 to 2**64-1"
    assert error_of(fpguard.decode, np.ones(2, np.float32), "fp16").startswith(
        "codes: dtype float32 is not supported by decode")
    assert error_of(fpguard.decode, np.ones(2, np.uint8), "fp16") == \
        "codes: dtype uint8 holds 8 bits; float16 codes have 16"
    meta = torch.ones(3, device="meta")
    assert error_of(fpguard.round, meta, "fp16") == \
        "a: a meta tensor; round takes CPU tensors (use .cpu())"
    # Control characters in a name are shown as \xNN, as the CLI shows them.
    assert error_of(fpguard.finfo, "bf\n16") == \
        "format 'bf\\x0a16': unknown format; did you mean 'bf16'?"


def type_error_of(f, *args, **kwargs):
    with pytest.raises(TypeError) as e:
        f(*args, **kwargs)
    assert not isinstance(e.value, ValueError)
    msg = str(e.value)
    assert "\n" not in msg and msg
    return msg


def test_wrong_scalar_types_are_type_errors(tmp_path):
    """A value of the wrong type is a TypeError naming the argument (fpguard.Error, a
    ValueError, stays for values of the right type that are wrong)."""
    x = np.ones(4, np.float32)
    assert type_error_of(fpguard.round, x, "fp16", seed="x") == \
        "seed: expected an integer, got str"
    assert type_error_of(fpguard.round, x, "fp16", seed=1.5) == \
        "seed: expected an integer, got float"
    assert type_error_of(fpguard.round, x, "fp16", saturate="yes") == \
        "saturate: expected a bool, got str"
    assert type_error_of(fpguard.round, x, "fp16", rounding=1) == \
        "rounding: expected a str, got int"
    assert type_error_of(fpguard.round, x, "mxfp8_e4m3", axis="0") == \
        "axis: expected an integer, got str"
    assert type_error_of(fpguard.encode, x, "fp16", flush_subnormals=None) == \
        "flush_subnormals: expected a bool, got NoneType"
    assert type_error_of(fpguard.stats, x, margin=[1]) == "margin: expected a number, got list"
    assert type_error_of(fpguard.stats, x, threads="2") == \
        "threads: expected an integer, got str"
    assert type_error_of(fpguard.safe_rsqrt, x, eps_scale="1") == \
        "eps_scale: expected a number, got str"
    # numpy scalars are numbers and integers.
    assert fpguard.round(x, "fp16", seed=np.uint64(3)).shape == (4,)
    assert fpguard.stats(x, margin=np.float32(0.5)).to_dict() == fpguard.stats(x).to_dict()
    path = str(tmp_path / "none.onnx")  # the types are checked before the model is read
    assert type_error_of(fpguard.check, path, samples="2") == \
        "samples: expected an integer, got str"
    assert type_error_of(fpguard.check, path, keep_fp32=[1]) == \
        "keep_fp32: expected a list of str, got int"
    assert type_error_of(fpguard.check, path, atol="0.1") == "atol: expected a number, got str"
    assert type_error_of(fpguard.plan, path, max_passes=2.0) == \
        "max_passes: expected an integer, got float"
    assert type_error_of(fpguard.run, path, {}, amax_margin="1") == \
        "amax_margin: expected an integer, got str"
    assert type_error_of(fpguard.gemm_error, sizes=["16"]) == \
        "sizes: expected an integer, got str"
    assert type_error_of(fpguard.accum, "fp16", value="1") == "value: expected a number, got str"
    assert type_error_of(fpguard.LossScaler, init_scale="1") == \
        "init_scale: expected a number, got str"
    assert type_error_of(fpguard.LossScaler, growth_interval=2.5) == \
        "growth_interval: expected an integer, got float"
    assert fpguard.LossScaler(init_scale=1024, growth_interval=np.int64(3)).get_scale() == 1024
    # Wrong values of the right type stay fpguard.Error.
    assert error_of(fpguard.round, x, "fp16", seed=-1).startswith("seed -1: ")
