"""fpguard.gemm_error, accum and targets: the rows of the CLI's --json on the same
arguments, as Records."""
import pytest

import fpguard
from conftest import cli_error


def test_gemm_error_is_the_cli(cli):
    want = cli.json("gemm-error", "--sizes", "16,40", "--formats", "fp16,e4m3",
                    "--accumulate", "bf16", "--accumulation", "blocked:8", "--samples", "2",
                    "--seed", "5", "--distribution", "uniform:-1:2", "--threads", "1")
    got = fpguard.gemm_error(sizes=[16, 40], formats=["fp16", "e4m3"], accumulate="bf16",
                             accumulation="blocked:8", samples=2, seed=5,
                             distribution="uniform:-1:2", threads=1)
    assert [r.to_dict() for r in got] == want["rows"]
    assert (got[0].size, got[0].format, got[1].format) == (16, "float16", "float8_e4m3fn")
    one = fpguard.gemm_error(sizes=16, formats="fp16", accumulate="same", threads=1)
    assert [r.to_dict() for r in one] == cli.json(
        "gemm-error", "--sizes", "16", "--formats", "fp16", "--accumulate", "same",
        "--threads", "1")["rows"]


def test_gemm_error_takes_scaled_formats_as_the_cli(cli):
    fs = ["mxfp4_e2m1", "nvfp4", "fp8", "fp16"]
    want = cli.json("gemm-error", "--sizes", "40", "--formats", ",".join(fs), "--output", "fp32",
                    "--threads", "1")
    got = fpguard.gemm_error(sizes=40, formats=fs, output="fp32", threads=1)
    assert [r.to_dict() for r in got] == want["rows"]
    assert [r.format for r in got] == ["mxfp4_e2m1", "nvfp4", "tensor:float8_e4m3fn", "float16"]
    for r in got:
        assert r.input_bound_violations == 0
        assert 0 < r.input_rounding_error <= r.input_rounding_bound


def test_accum_is_the_cli(cli):
    want = cli.json("accum", "--format", "fp16,bf16", "--value", "0.1", "--start", "2")
    got = fpguard.accum(["fp16", "bf16"], value=0.1, start=2)
    assert [r.to_dict() for r in got] == want["rows"]
    assert got[0].stagnation_count == want["rows"][0]["stagnation_count"]
    every = fpguard.accum(value=1e30)  # --all: formats that cannot hold it are skipped rows
    want = cli.json("accum", "--all", "--value", "1e30")["rows"]
    for r in want:  # the CLI names the flag (--value) where Python names the argument
        if "skipped" in r:
            r["skipped"] = r["skipped"].replace("--value", "value", 1)
    assert [r.to_dict() for r in every] == want
    assert any("skipped" in r for r in every) and any("skipped" not in r for r in every)


def test_targets_are_the_cli(cli):
    assert [t.to_dict() for t in fpguard.targets()] == cli.json("targets")["targets"]
    h100 = fpguard.targets("h100", format="float8_e4m3fn")
    assert [t.to_dict() for t in h100] == cli.json("targets", "h100", "--format",
                                                   "float8_e4m3fn")["targets"]
    assert h100[0].name == "sm_90" and "float8_e4m3fn" in h100[0].matrix_formats


def test_experiment_errors_are_the_cli(cli):
    def same(f, argv, flag, option):
        want = cli_error(cli(*argv, check=False))
        with pytest.raises(fpguard.Error) as e:
            f()
        assert str(e.value) == want.replace(flag, option, 1), (str(e.value), want)

    same(lambda: fpguard.targets("h1000"), ["targets", "h1000"], "", "")
    same(lambda: fpguard.gemm_error(sizes=[16], formats=["fp61"]),
         ["gemm-error", "--sizes", "16", "--formats", "fp61"], "", "")
    same(lambda: fpguard.gemm_error(sizes=[16], accumulation="blocked:0"),
         ["gemm-error", "--sizes", "16", "--accumulation", "blocked:0"], "--accumulation",
         "accumulation")
    same(lambda: fpguard.accum("e8m0"), ["accum", "--format", "e8m0"], "", "")
