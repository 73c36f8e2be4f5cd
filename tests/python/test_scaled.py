"""Scaled formats from Python (MX, NVFP4, scaled FP8): finfo, round and encode against the
CLI's `finfo`, `round` and `round --encode` on the same data, and run/check in a scaled
precision against `fpguard run` and `fpguard check --json`. The parser of precisions is the
CLI's (one library function), so are its "did you mean" and refusals."""
import json
import os

import numpy as np
import pytest
import torch

import fpguard
from conftest import cli_error

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EXAMPLE = {e: os.path.relpath(os.path.join(ROOT, "examples", e, "model.onnx"))
           for e in ("clean_cnn", "transformer_block")}
SCALED = ["mxfp8_e4m3", "mxfp4_e2m1", "nvfp4", "fp8", "channel:float8_e4m3fn",
          "block:float8_e4m3fn:e8m0:16", "mxint8"]


def error_of(f, *args, **kwargs):
    with pytest.raises(fpguard.Error) as e:
        f(*args, **kwargs)
    msg = str(e.value)
    assert "\n" not in msg and msg
    return msg


@pytest.mark.parametrize("name", SCALED)
def test_finfo_of_a_scaled_format_is_the_cli(cli, name):
    info = fpguard.finfo(name)
    assert isinstance(info, fpguard.scaled_finfo) and not isinstance(info, fpguard.finfo)
    want = cli.json("finfo", name)[0]
    assert info.to_dict() == want
    assert str(info) == cli("finfo", name).stdout.rstrip("\n")
    assert (info.name, info.block_size, info.max) == (want["format"], want["block_size"],
                                                      want["max"])
    assert (info.element.dtype, info.element.max) == (want["element"]["dtype"],
                                                      want["element"]["max"])
    assert info == fpguard.scaled_finfo(name)
    # Scalar formats are unchanged: finfo objects, torch's values.
    assert isinstance(fpguard.finfo("float16"), fpguard.finfo)
    assert all(isinstance(f, fpguard.finfo) for f in fpguard.formats())


def data(shape=(24, 80), seed=3):
    """Normal values with a few large, tiny and zero ones (saturation and underflow)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    x.flat[::37] *= 1e4
    x.flat[5::41] *= 1e-6
    x.flat[7::53] = 0
    return x


@pytest.mark.parametrize("name,axis", [(n, None) for n in SCALED] +
                         [("mxfp4_e2m1", 0), ("channel:float8_e4m3fn", 1), ("nvfp4", 0)])
def test_round_and_encode_are_the_cli(cli, tmp_path, name, axis):
    x = data()
    np.save(tmp_path / "x.npy", x)
    flags = [] if axis is None else ["--axis", str(axis)]
    cli("round", name, str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy"), *flags)
    want = np.load(tmp_path / "y.npy")
    got = fpguard.round(x, name, axis=axis)
    assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), want.view(np.uint32))
    # float64 too, in place.
    x64 = x.astype(np.float64)
    np.save(tmp_path / "x64.npy", x64)
    cli("round", name, str(tmp_path / "x64.npy"), "-o", str(tmp_path / "y64.npy"), *flags)
    assert fpguard.round(x64, name, out=x64, axis=axis) is x64
    assert np.array_equal(x64, np.load(tmp_path / "y64.npy"))
    # A torch tensor in place, its memory shared.
    t = torch.from_numpy(x.copy())
    ptr = t.data_ptr()
    assert fpguard.round(t, name, out=t, axis=axis) is t and t.data_ptr() == ptr
    assert np.array_equal(t.numpy(), want)
    # encode: the .npz of `round --encode`.
    cli("round", name, str(tmp_path / "x.npy"), "-o", str(tmp_path / "c.npz"), "--encode",
        *flags)
    npz = np.load(tmp_path / "c.npz")
    codes = fpguard.encode(x, name, axis=axis)
    assert sorted(codes) == sorted(npz.files)
    for k in npz.files:
        assert codes[k].dtype == npz[k].dtype and np.array_equal(codes[k], npz[k]), k


def test_scaled_round_refusals_are_the_cli(cli, tmp_path):
    x = data((4, 32))
    np.save(tmp_path / "x.npy", x)
    out = str(tmp_path / "y.npy")

    def cli_says(*argv):
        return cli_error(cli("round", *argv, check=False)).split(": ", 1)[1]

    assert error_of(fpguard.round, x, "nvfp4", rounding="toward-zero").split(": ", 1)[1] == \
        cli_says("nvfp4", str(tmp_path / "x.npy"), "-o", out, "--rounding", "toward-zero")
    assert error_of(fpguard.round, x, "float16", axis=0).split(": ", 1)[1] == \
        cli_says("float16", str(tmp_path / "x.npy"), "-o", out, "--axis", "0")
    assert error_of(fpguard.round, x, "mxfp4_e2m1", axis=2) == \
        cli_error(cli("round", "mxfp4_e2m1", str(tmp_path / "x.npy"), "-o", out, "--axis",
                      "2", check=False))
    assert error_of(fpguard.round, x, "mxfp8_e4m4") == \
        "format 'mxfp8_e4m4': unknown format; did you mean 'mxfp8_e4m3'?"
    assert error_of(fpguard.encode, x, "block:e4m3:e8m0:0").startswith("format ")
    assert not os.path.exists(out)


def example_inputs(path):
    d = os.path.join(os.path.dirname(path), "inputs")
    return d, {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d))}


@pytest.mark.parametrize("example,precision", [("transformer_block", "mxfp8_e4m3"),
                                               ("transformer_block", "fp8"),
                                               ("clean_cnn", "channel:float8_e4m3fn"),
                                               ("clean_cnn", "nvfp4")])
def test_run_in_a_scaled_precision_is_the_cli(cli, tmp_path, example, precision):
    path = EXAMPLE[example]
    d, feed = example_inputs(path)
    cli("run", path, "--inputs", d, "--precision", precision, "--other-precision", "float16",
        "--amax-margin", "1", "--outputs", str(tmp_path))
    got = fpguard.run(path, feed, precision=precision, other_precision="float16",
                      amax_margin=1)
    for name, value in got.items():
        want = np.load(tmp_path / f"{name}.npy")
        assert value.dtype == want.dtype and np.array_equal(value, want, equal_nan=True), name
    # Not the float16 run: the operands were quantized.
    plain = fpguard.run(path, feed, precision="float16")
    assert any(not np.array_equal(got[k], plain[k]) for k in got)


@pytest.mark.parametrize("example,precision", [("transformer_block", "mxfp8_e4m3"),
                                               ("clean_cnn", "fp8")])
def test_check_in_a_scaled_precision_is_the_cli(cli, example, precision):
    path = EXAMPLE[example]
    want = json.loads(cli("check", path, "--precision", precision, "--samples", "2",
                          "--amax-margin", "2", "--json", "-", check=False).stdout)
    got = fpguard.check(path, precision=precision, samples=2, amax_margin=2)
    assert got.to_dict() == want and got.precision == fpguard.finfo(precision).name


def test_check_keep_unscaled_is_the_cli(cli):
    path = EXAMPLE["transformer_block"]
    d = fpguard.check(path, precision="mxfp4_e2m1", samples=1)
    gemms = [n.name for n in d.nodes if n.scaled_operands][:1]
    assert gemms
    want = json.loads(cli("check", path, "--precision", "mxfp4_e2m1", "--keep-unscaled",
                          gemms[0], "--json", "-", check=False).stdout)
    got = fpguard.check(path, precision="mxfp4_e2m1", keep_unscaled=gemms)
    assert got.to_dict() == want
    node = [n for n in got.nodes if n.name == gemms[0]][0]
    assert node.precision == "bfloat16" and not node.scaled_operands
    assert error_of(fpguard.check, path, precision="fp16", keep_unscaled=gemms).startswith(
        "keep_unscaled: applies to a scaled precision")
    # A node that is not a scaled GEMM: the CLI's refusal, named as Python names it.
    other = next(n for n in d.nodes if n.op_type not in ("MatMul", "Gemm", "Conv"))
    want = cli_error(cli("check", path, "--precision", "mxfp4_e2m1", "--keep-unscaled",
                         other.name, check=False))
    assert want == f"--keep-unscaled {other.name}: '{other.name}' is a {other.op_type} node; " \
        "only MatMul, Gemm and Conv operands are quantized"
    for f in (fpguard.check, fpguard.plan):
        assert error_of(f, path, precision="mxfp4_e2m1", keep_unscaled=[other.name]) == \
            "keep_unscaled" + want[len("--keep-unscaled"):]


def test_precision_refusals_are_the_cli(cli):
    """The CLI names its flags (--other-precision) where Python names the argument
    (other_precision); the rest of the line is the same."""
    path = EXAMPLE["transformer_block"]

    def cli_says(*argv):
        return cli_error(cli("check", path, *argv, check=False))

    want = cli_says("--precision", "nvfp4", "--other-precision", "mxfp4_e2m1")
    assert want.startswith("--other-precision mxfp4_e2m1: a scaled format")
    assert error_of(fpguard.check, path, precision="nvfp4", other_precision="mxfp4_e2m1") == \
        "other_precision" + want[len("--other-precision"):]
    want = cli_says("--precision", "nvfp4", "--other-precision", "float32")
    assert error_of(fpguard.run, path, {}, precision="nvfp4", other_precision="float32") == \
        "other_precision" + want[len("--other-precision"):]
    assert error_of(fpguard.check, path, precision="mxfp8_e4m4") == \
        cli_says("--precision", "mxfp8_e4m4")
    assert error_of(fpguard.plan, path, precision="mxfp8_e4m4") == \
        cli_says("--precision", "mxfp8_e4m4")


@pytest.mark.parametrize("example,precision,margin", [("clean_cnn", "mxfp4_e2m1", 0),
                                                      ("transformer_block", "fp8", -4)])
def test_plan_in_a_scaled_precision_is_the_cli(cli, tmp_path, example, precision, margin):
    """plan.json as the CLI's (field by field), with other_precision and amax_margin, on
    examples where the plan keeps GEMMs; then convert refuses the plan as the CLI does (ONNX
    has no block-scaled types to write)."""
    path = EXAMPLE[example]
    d, feed = example_inputs(path)
    # (No scale rewrites: the float32 nodes alone are then the plan's fix.)
    flags = ["--precision", precision, "--other-precision", "float16", "--amax-margin",
             str(margin), "--scale", "none"]
    cli("plan", path, "--inputs", d, *flags, "-o", str(tmp_path / "cli.json"), "--quiet")
    p = fpguard.plan(path, feed, precision=precision, other_precision="float16",
                     amax_margin=margin, scale="none")
    want = json.loads((tmp_path / "cli.json").read_text())
    # Arrays given are no files: the plan records no inputs for convert to verify on.
    assert p.to_dict()["inputs"] is None and want.pop("inputs")
    assert {k: v for k, v in p.to_dict().items() if k != "inputs"} == want
    assert p.precision == fpguard.finfo(precision).name
    assert p.fp32_nodes or p.unscaled_nodes
    # The plan's float32 and unscaled nodes are what the check in that precision needs: it
    # fails without them and passes with them.
    def verdict(keep_fp32=(), keep_unscaled=()):
        return fpguard.check(path, feed, precision=precision, other_precision="float16",
                             amax_margin=margin, keep_fp32=keep_fp32,
                             keep_unscaled=keep_unscaled).verdict
    assert verdict() == "fail"
    assert verdict(p.fp32_nodes, p.unscaled_nodes) == "pass"
    want = cli_error(cli("convert", path, "--plan", str(tmp_path / "cli.json"), "-o",
                         str(tmp_path / "cli.onnx"), check=False))
    assert error_of(fpguard.convert, path, p, tmp_path / "py.onnx") == \
        want.replace("--plan " + str(tmp_path / "cli.json"), "plan", 1).replace(
            " (--scale-only writes its rescaled model)", "")
    assert not (tmp_path / "py.onnx").exists() and not (tmp_path / "cli.onnx").exists()
