#!/usr/bin/python3
"""End-to-end tests of `fpguard run` and `fpguard ops` on the models of
tests/data/make_models.py: outputs against NumPy, outputs.json, --json fields,
--precision, generated inputs (--seed reproducible), --shape for dynamic dimensions,
--dump-all, sequence and optional inputs/outputs, and errors (one line, exit 2).

    run_test.py --fpguard PATH
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))
import make_models  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import check, fails, failures, read_outputs, run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    f = ap.parse_args().fpguard
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "models")
        make_models.main(d)
        out = os.path.join(tmp, "out")
        mlp = os.path.join(d, "mlp.onnx")

        # Outputs against NumPy, and the outputs.json name map.
        r = run(f, "run", mlp, "--input", "x=" + os.path.join(d, "mlp_x.npy"), "--outputs", out,
                "--json", "--repeat", "3")
        check(r.returncode == 0, "mlp runs", r.stderr)
        j = json.loads(r.stdout)
        check(j["schema_version"] == 1, "schema_version")
        o = j["outputs"][0]
        check(o["name"] == "y" and o["shape"] == [2, 3] and o["dtype"] == "float32", "output fields", o)
        want = np.load(os.path.join(d, "mlp_y.npy"))
        check(abs(o["absmax"] - np.abs(want).max()) < 1e-5, "absmax", o)
        check(j["timing"]["runs"] == 3 and j["timing"]["median_run_ms"] >= 0, "timing", j["timing"])
        mem = j["memory"]  # this process's VmHWM and its VmRSS before the model was loaded
        check(0 < mem["start_rss_mib"] <= mem["peak_rss_mib"] < 4096, "memory", mem)
        names = json.load(open(os.path.join(out, "outputs.json")))
        files = {t["name"]: t["file"] for t in names["tensors"]}
        got = np.load(os.path.join(out, files["y"]))
        check(np.allclose(got, want, rtol=1e-5, atol=1e-6), "mlp output values", (got, want))

        # --precision float16: the RMS of 300s overflows.
        pms = os.path.join(d, "pow_mean_sqrt.onnx")
        x = os.path.join(tmp, "x300.npy")
        np.save(x, np.full((1, 4), 300, np.float32))
        r32 = json.loads(run(f, "run", pms, "--input", "x=" + x, "--json").stdout)
        check(r32["outputs"][0]["max"] == 300, "float32 RMS", r32)
        r16 = run(f, "run", pms, "--input", "x=" + x, "--json", "--precision", "fp16")
        check(json.loads(r16.stdout)["outputs"][0]["max"] is None, "float16 RMS overflows (null)",
              r16.stdout)

        # Generated inputs are reproducible by seed; --shape fixes dynamic dimensions.
        dyn = os.path.join(d, "dynamic.onnx")
        a = run(f, "run", dyn, "--shape", "x=5,3", "--input", "x=normal:0:1", "--seed", "7", "--json")
        b = run(f, "run", dyn, "--shape", "x=5,3", "--input", "x=normal:0:1", "--seed", "7", "--json")
        check(a.returncode == 0 and json.loads(a.stdout)["outputs"] == json.loads(b.stdout)["outputs"],
              "seeded inputs reproducible", a.stderr)
        check(json.loads(a.stdout)["outputs"][0]["shape"] == [5, 3], "--shape", a.stdout)
        fails(f, "dynamic without --shape", ["run", dyn], "input 'x'", "dimension 0 ('batch')", "--shape")

        # --dump-all writes every node output.
        dump = os.path.join(tmp, "dump")
        r = run(f, "run", mlp, "--dump-all", dump)
        names = [t["name"] for t in json.load(open(os.path.join(dump, "outputs.json")))["tensors"]]
        check(names == ["h0", "h1", "h2", "y"], "--dump-all names", names)

        # Errors.
        fails(f, "unsupported ops", ["run", os.path.join(d, "unsupported.onnx")],
              "unsupported ops: AlsoNotAnOp, NotAnOp")
        fails(f, "unknown input", ["run", mlp, "--input", "X=uniform:0:1"], "did you mean 'x'")
        fails(f, "missing file", ["run", os.path.join(d, "nope.onnx")], "nope.onnx")

        # Sequences and optionals: .pb inputs (SequenceProto, OptionalProto), outputs as
        # one .npy per element and null for an empty optional.
        vals = os.path.join(d, "values.onnx")
        s_pb, x_npy = os.path.join(d, "values_s.pb"), os.path.join(d, "values_x.npy")
        for opt, want_o in (("values_o_seq.pb", [np.array([5], np.float32)]),
                            ("values_o_none.pb", None)):
            vout = os.path.join(tmp, "vout_" + opt)
            r = run(f, "run", vals, "--input", "s=" + s_pb, "--input", "x=" + x_npy, "--input",
                    "o=" + os.path.join(d, opt), "--outputs", vout, "--json")
            check(r.returncode == 0, f"values model runs ({opt})", r.stderr)
            got = read_outputs(vout)
            check([a.tolist() for a in got["s2"]] == [[1, 2], [3], [4, 5]], "sequence output", got)
            check(got["y"].tolist() == [1, 2, 3, 4, 5], "ConcatFromSequence output", got)
            check((got["o2"] is None and want_o is None) or
                  (want_o is not None and [a.tolist() for a in got["o2"]] == [[5]]),
                  f"optional output ({opt})", got)
            entries = {e["name"]: e for e in json.load(open(os.path.join(vout, "outputs.json")))["tensors"]}
            check(entries["s2"]["kind"] == "sequence" and entries["s2"]["dtypes"] == ["float32"] * 3
                  and entries["y"]["kind"] == "tensor", "outputs.json kinds", entries)
            printed = {o["name"]: o for o in json.loads(r.stdout)["outputs"]}
            check(printed["s2"]["kind"] == "sequence" and len(printed["s2"]["items"]) == 3 and
                  printed["y"]["shape"] == [5], "--json sequence summary", printed)
        fails(f, "sequence input not given", ["run", vals, "--input", "x=" + x_npy], "input 's'",
              "cannot be generated")
        fails(f, "tensor file for a sequence", ["run", vals, "--input", "s=" + x_npy, "--input",
                                                "x=" + x_npy, "--input",
                                                "o=" + os.path.join(d, "values_o_none.pb")],
              "input 's'", "is a tensor but the model declares a sequence")
        # check takes them too: a verdict per output, a sequence's per element.
        cj = os.path.join(tmp, "values_check.json")
        r = run(f, "check", vals, "--precision", "fp16", "--input", "s=" + s_pb, "--input",
                "x=" + x_npy, "--input", "o=" + os.path.join(d, "values_o_none.pb"), "--json", cj)
        check(r.returncode == 0, "check on sequence and optional inputs passes", r.stderr)
        if r.returncode == 0:
            outs = {o["name"]: o for o in json.load(open(cj))["outputs"]}
            check([e["name"] for e in outs["s2"]["elements"]] == ["s2[0]", "s2[1]", "s2[2]"] and
                  outs["o2"]["elements"] == [] and outs["o2"]["pass"], "check's sequence verdicts",
                  outs)

        # Strings: written as NumPy unicode arrays.
        x3 = os.path.join(tmp, "x3.npy")
        np.save(x3, np.array([0.1, -2.5, np.inf], np.float32))
        sout = os.path.join(tmp, "sout")
        r = run(f, "run", os.path.join(d, "to_text.onnx"), "--input", "x=" + x3, "--outputs", sout)
        got = read_outputs(sout)["y"]
        check(r.returncode == 0 and got.dtype.kind == "U" and got.tolist() == ["0.1", "-2.5", "INF"],
              "string output", (r.stderr, got))

        ops = json.loads(run(f, "ops", "--json").stdout)["ops"]
        check("MatMul" in ops and "Softmax" in ops, "ops --json", ops)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
