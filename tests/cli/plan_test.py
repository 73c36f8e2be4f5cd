#!/usr/bin/python3
"""End-to-end tests of what `fpguard plan` hands on to `fpguard convert`:

- plan.json records the inputs the plan was made on (files made absolute, generator specs,
  the --inputs directory, --shape, --seed, --samples, the generated inputs), and
  `convert --plan` verifies on them from another directory: a model with a dynamic batch
  dimension converts without repeating --shape; the verification equals one with the
  options given by hand; convert's own options override; a moved input file is an error
  naming the plan, with nothing written; an older plan.json without `inputs` still reads.
- plan never prints a convert command that convert refuses: every `fpguard convert ...`
  it prints (float16, float8_e4m3fn, with and without scaling) is run and accepted; FP8
  plans name the quantization path instead; convert refuses an FP8 plan naming it.
- `--emit ort` / `--emit trtexec` on a plan that scales warn on stderr that the lists
  hold only on the rescaled model, and stdout stays the bare settings.
- `--objective fewest-casts` on a model where it matters: an overflow whose out-of-range
  value is read by a node that absorbs it (Tanh: tanh(inf) = tanh(90000) = 1), so the
  default objective prunes that reader back to float16 at the price of two Casts; with
  fewest-casts it stays in float32: fewer Casts (plan.json's count equals the Cast nodes
  convert adds), and both converted models meet the tolerance in ONNX Runtime against
  NumPy's float32 outputs. With exact scaling, the same model gets one rewrite (the
  multiply-back it puts before the Tanh overflows in turn and is kept in float32, not
  scaled again until the passes run out), converted and run in ONNX Runtime as well.

    plan_test.py --fpguard PATH --examples DIR --ort-node DIR
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ortcheck  # noqa: E402
from clitest import check, fails, failures, first_line, run  # noqa: E402


def run_in(fpguard, cwd, *argv):
    return subprocess.run([fpguard, *argv], capture_output=True, text=True, timeout=300, cwd=cwd)


def dynamic_model(path):
    """y = (x * 300)^2 + mask, x and mask float32 [N, 4] with N dynamic: the Pow overflows
    float16 wherever |x| > 0.853 (65504^0.5 / 300)."""
    F = TensorProto.FLOAT
    big = numpy_helper.from_array(np.array(300, np.float32), "big")
    two = numpy_helper.from_array(np.array(2, np.float32), "two")
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "big"], ["a"], name="/Mul"),
         helper.make_node("Pow", ["a", "two"], ["p"], name="/Pow"),
         helper.make_node("Add", ["p", "mask"], ["y"], name="/Add")],
        "dyn", [helper.make_tensor_value_info("x", F, ["N", 4]),
                helper.make_tensor_value_info("mask", F, ["N", 4])],
        [helper.make_tensor_value_info("y", F, ["N", 4])], [big, two])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def verified_lines(stdout):
    return [line for line in stdout.splitlines() if line.strip().startswith("verified")]


def recorded_inputs(f, tmp):
    model = os.path.join(tmp, "dyn.onnx")
    dynamic_model(model)
    np.save(os.path.join(tmp, "mask.npy"), np.full((2, 4), 0.25, np.float32))
    # Planned from tmp with relative paths.
    r = run_in(f, tmp, "plan", "dyn.onnx", "--input", "mask=mask.npy", "--shape", "x=2,4",
               "--seed", "5", "--precision", "fp16", "--scale", "none", "-o", "plan.json",
               "--html", "plan.html", "--quiet")
    check(r.returncode == 0, "plan of the dynamic model", (r.returncode, r.stdout, r.stderr))
    check(first_line(r).startswith(
        "PLAN (generated inputs: x uniform [-1, 1]; ranges unverified)  dyn.onnx"),
        "the plan's verdict says what it holds under", first_line(r))
    check("note: x was generated, not read from data" in r.stdout, "and the advice follows",
          r.stdout)
    with open(os.path.join(tmp, "plan.html")) as fh:
        page = fh.read()
    check("(generated inputs: x uniform [-1, 1]; ranges unverified)" in page and
          "x was generated, not read from data" in page, "the plan's HTML says so too")
    with open(os.path.join(tmp, "plan.json")) as fh:
        p = json.load(fh)
    want = {"input": ["mask=" + os.path.join(os.path.realpath(tmp), "mask.npy")],
            "inputs": None, "shape": ["x=2,4"], "seed": 5, "samples": 1,
            "generated": [{"name": "x", "generator": "uniform:-1:1", "default": True}]}
    got = dict(p.get("inputs") or {})
    if got.get("input"):  # tmp may be reached through a symlink: compare resolved paths
        got["input"] = ["mask=" + os.path.realpath(got["input"][0].split("=", 1)[1])]
    check(got == want, "plan.json records the inputs (absolute paths)", p.get("inputs"))
    check("/Pow" in p["fp32_nodes"], "the plan keeps /Pow in float32", p["fp32_nodes"])

    # convert --plan from another directory, nothing repeated.
    out = os.path.join(tmp, "dyn16.onnx")
    plan = os.path.join(tmp, "plan.json")
    r = run_in(f, "/", "convert", model, "--plan", plan, "-o", out)
    check(r.returncode == 0 and "verified y: ok" in r.stdout and
          "the inputs the plan records" in r.stdout and
          "note: verified on generated inputs: x was generated" in r.stdout,
          "convert --plan verifies on the plan's inputs", (r.returncode, r.stdout, r.stderr))
    # The same verification as with the options given by hand (same tensors: the same
    # errors to every printed digit); another seed gives other tensors.
    by_hand = run(f, "convert", model, "--precision", "fp16", "--keep-fp32", ",".join(p["fp32_nodes"]), "-o", out,
                  "--input", "mask=" + os.path.join(tmp, "mask.npy"), "--shape", "x=2,4",
                  "--seed", "5")
    check(verified_lines(r.stdout) == verified_lines(by_hand.stdout) != [],
          "the plan's inputs are the ones given by hand", (r.stdout, by_hand.stdout))
    seed6 = run(f, "convert", model, "--plan", plan, "-o", out, "--seed", "6")
    check(seed6.returncode == 0 and verified_lines(seed6.stdout) != verified_lines(r.stdout),
          "--seed overrides the plan's seed", (seed6.stdout, r.stdout))
    shape = run(f, "convert", model, "--plan", plan, "-o", out, "--shape", "x=3,4", "--shape",
                "mask=3,4", "--input", "mask=uniform:0:1")
    check(shape.returncode == 0 and "the inputs the plan records" not in shape.stdout,
          "--shape and --input override the plan's", (shape.returncode, shape.stdout, shape.stderr))
    # Samples and a directory of inputs are recorded too.
    sets = os.path.join(tmp, "sets", "test_data_set_0")
    os.makedirs(sets)
    for name, v in (("x", 0.5), ("mask", 0.0)):
        t = numpy_helper.from_array(np.full((1, 4), v, np.float32), name)
        with open(os.path.join(sets, f"input_{0 if name == 'x' else 1}.pb"), "wb") as fh:
            fh.write(t.SerializeToString())
    r = run_in(f, tmp, "plan", "dyn.onnx", "--inputs", "sets", "--samples", "2", "--precision",
               "fp16", "-o", "plan_sets.json", "--quiet")
    with open(os.path.join(tmp, "plan_sets.json")) as fh:
        ps = json.load(fh).get("inputs") or {}
    check(r.returncode == 0 and os.path.isabs(ps.get("inputs") or "") and
          os.path.realpath(ps["inputs"]) == os.path.realpath(os.path.join(tmp, "sets")) and
          ps.get("samples") == 2 and ps.get("generated") == [],
          "plan.json records --inputs (absolute) and --samples", (r.stderr, ps))
    r = run_in(f, "/", "convert", model, "--plan", os.path.join(tmp, "plan_sets.json"), "-o", out)
    check(r.returncode == 0 and "generated" not in r.stdout,
          "convert verifies on the recorded --inputs", (r.returncode, r.stdout, r.stderr))

    # An older plan.json without "inputs": the dynamic dimension needs --shape again, and
    # the error comes before anything is written.
    old = os.path.join(tmp, "old.json")
    with open(old, "w") as fh:
        json.dump({k: v for k, v in p.items() if k != "inputs"}, fh)
    never = os.path.join(tmp, "never.onnx")
    fails(f, "old plan, dynamic dimension", ["convert", model, "--plan", old, "-o", never],
          "--shape", "dimension 0 ('N') is dynamic", "x=D0,D1,...")
    check(not os.path.exists(never), "no output when the inputs are bad")
    # A recorded file that moved: the error names the plan and the file.
    os.rename(os.path.join(tmp, "mask.npy"), os.path.join(tmp, "moved.npy"))
    fails(f, "moved input file", ["convert", model, "--plan", plan, "-o", never], "--plan",
          "mask.npy", "the inputs it records")
    check(not os.path.exists(never), "no output when the plan's inputs are gone")
    # --require-inputs on plan and convert: a generated input is an error, before any output.
    fails(f, "plan --require-inputs", ["plan", model, "--precision", "fp16", "--shape", "x=2,4",
                                       "--input", "mask=uniform:0:1", "--require-inputs",
                                       "-o", os.path.join(tmp, "never.json")],
          "--require-inputs", "x=uniform:-1:1, mask=uniform:0:1")
    check(not os.path.exists(os.path.join(tmp, "never.json")), "no plan.json when refused")
    os.rename(os.path.join(tmp, "moved.npy"), os.path.join(tmp, "mask.npy"))
    fails(f, "convert --require-inputs on a plan's generated input",
          ["convert", model, "--plan", plan, "-o", never, "--require-inputs"],
          "--require-inputs", "x=uniform:-1:1")
    check(not os.path.exists(never), "no output when convert refuses generated inputs")


def printed_converts(stdout):
    """Every `fpguard convert ...` command the plan text prints, as argv lists."""
    out = []
    for line in stdout.splitlines():
        i = line.find("fpguard convert ")
        if i >= 0 and not line[i:].startswith("fpguard convert writes"):
            words = shlex.split(line[i:].split(" (write")[0])
            out.append(words[1:])
    return out


def no_refused_commands(f, ex, tmp):
    """Each convert command plan prints is one convert accepts (exit 0 or 1, never 2)."""
    model = os.path.join(ex, "superres", "model.onnx")
    inputs = os.path.join(ex, "superres", "inputs")
    seen = 0
    for precision, scale in (("fp16", "none"), ("fp16", "auto"), ("float8_e4m3fn", "none"),
                             ("float8_e4m3fn", "auto")):
        plan = os.path.join(tmp, f"sr_{precision}_{scale}.json")
        r = run(f, "plan", model, "--inputs", inputs, "--precision", precision, "--scale", scale,
                "-o", plan, "--quiet", "--max-passes", "12")
        check(r.returncode in (0, 1), f"plan {precision} {scale}", (r.returncode, r.stderr))
        fp8 = precision.startswith("float8")
        check(("--precision float8" in r.stdout) is False, f"{precision} {scale}: no fp8 convert",
              r.stdout)
        if fp8:
            check("quantization tool" in r.stdout and "nodes_to_exclude" in r.stdout,
                  f"{precision} {scale}: the quantization path", r.stdout)
        for argv in printed_converts(r.stdout):
            seen += 1
            target = os.path.join(tmp, f"printed_{seen}.onnx")
            if "-o" in argv:
                argv[argv.index("-o") + 1] = target
            else:
                argv += ["-o", target]
            rc = run(f, *argv)
            check(rc.returncode in (0, 1) and os.path.exists(target),
                  f"printed command accepted: {' '.join(argv)}", (rc.returncode, rc.stderr))
        if fp8:
            fails(f, f"convert an {precision} plan", ["convert", model, "--plan", plan, "-o",
                                                      os.path.join(tmp, "never8.onnx")],
                  "--plan", "float8_e4m3fn", "quantization tool")
    check(seen >= 2, "plan printed convert commands to try", seen)


def emit_warnings(f, ex, tmp):
    model = os.path.join(ex, "superres", "model.onnx")
    inputs = os.path.join(ex, "superres", "inputs")
    for emit in ("ort", "trtexec"):
        r = run(f, "plan", model, "--inputs", inputs, "--precision", "fp16", "--emit", emit,
                "--quiet")
        check(r.returncode == 0 and "fpguard: warning:" in r.stderr and
              "--scale-only" in r.stderr and "rescaled model" in r.stderr,
              f"--emit {emit} on a scaling plan warns", (r.returncode, r.stderr))
        if emit == "ort":
            j = json.loads(r.stdout) if r.stdout.startswith("{") else None
            check(j is not None and set(j) == {"node_block_list", "op_block_list"},
                  "--emit ort: stdout is the bare block lists", r.stdout)
        r = run(f, "plan", model, "--inputs", inputs, "--precision", "fp16", "--emit", emit,
                "--scale", "none", "--quiet")
        check(r.returncode == 0 and r.stderr == "", f"--emit {emit} without scaling: no warning",
              r.stderr)


def absorbing_model(path):
    """pre = x * 2 -> up = pre * 300 -> down = up * 2^-10 (y1) and squash = tanh(up) (y2):
    `up` overflows float16 where |pre| > 218, `down` brings it back in range and `squash`
    saturates either way."""
    F = TensorProto.FLOAT
    consts = [numpy_helper.from_array(np.array(v, np.float32), n)
              for n, v in (("two", 2), ("gain", 300), ("shrink", 2.0 ** -10))]
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["pre"], name="/pre"),
         helper.make_node("Mul", ["pre", "gain"], ["up"], name="/up"),
         helper.make_node("Mul", ["up", "shrink"], ["y1"], name="/down"),
         helper.make_node("Tanh", ["up"], ["y2"], name="/squash")],
        "absorb", [helper.make_tensor_value_info("x", F, [4])],
        [helper.make_tensor_value_info("y1", F, [4]), helper.make_tensor_value_info("y2", F, [4])],
        consts)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)


def cosine(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b))


def planned(f, ort_dir, tmp, model, inputs, want, tag, *args):
    """Plans `model` in float16 with `args`, converts the plan (--keep-io-types) and runs it
    in ONNX Runtime: (plan.json, Cast nodes in the converted model), None when a step
    fails. Each output must meet the plan's cosine against `want` (NumPy's float32)."""
    p = os.path.join(tmp, f"{tag}.json")
    r = run(f, "plan", model, "--inputs", inputs["dir"], "--precision", "fp16", "-o", p,
            "--quiet", *args)
    check(r.returncode == 0, f"{tag}: plan meets the tolerance", (r.returncode, r.stdout, r.stderr))
    if r.returncode != 0:
        return None
    with open(p) as fh:
        plan = json.load(fh)
    out = os.path.join(tmp, f"{tag}.onnx")
    r = run(f, "convert", model, "--plan", p, "-o", out, "--keep-io-types")
    check(r.returncode == 0, f"{tag}: convert verifies the plan", (r.returncode, r.stderr))
    if r.returncode != 0:
        return None
    casts = sum(n.op_type == "Cast" for n in onnx.load(out).graph.node)
    got = ortcheck.run_ort(ort_dir, out, inputs["arrays"], tmp)
    for name, ref in want.items():
        c = cosine(ref, got[name]) if got and name in got else float("nan")
        check(c >= plan["tolerance"]["min_cosine"],
              f"{tag}: {name} meets the tolerance in ONNX Runtime", c)
    return plan, casts


def fewest_casts(f, ort_dir, tmp):
    """The default objective against --objective fewest-casts (see the module doc); and the
    same model with exact scaling: one rewrite, whose multiply-back before the Tanh then
    overflows and is kept in float32 (not scaled again, and again); the Tanh, absorbing
    its inf, goes back to float16."""
    model = os.path.join(tmp, "absorb.onnx")
    absorbing_model(model)
    x = np.array([150, 5e-4, -1e-3, 1.5e-3], np.float32)
    d = os.path.join(tmp, "absorb_in")
    os.makedirs(d)
    np.save(os.path.join(d, "x.npy"), x)
    inputs = {"dir": d, "arrays": {"x": x}}
    up = x * np.float32(2) * np.float32(300)
    want = {"y1": up * np.float32(2.0 ** -10), "y2": np.tanh(up)}
    with np.errstate(over="ignore"):  # float16(90000) is inf on purpose
        check(np.isinf(np.float16(up[0])) and np.tanh(np.float32(np.inf)) == np.tanh(up[0]),
              "setup: `up` overflows float16 and tanh absorbs it", up)
    got = {}
    for objective in ("fewest-fp32", "fewest-casts"):
        got[objective] = planned(f, ort_dir, tmp, model, inputs, want, f"absorb_{objective}",
                                 "--scale", "none", "--objective", objective)
        if got[objective]:
            plan, casts = got[objective]
            check(casts == plan["casts"], f"{objective}: plan.json's casts are the Casts convert adds",
                  (casts, plan["casts"]))
    if all(got.values()):
        fp32 = {k: v[0]["fp32_nodes"] for k, v in got.items()}
        check(fp32 == {"fewest-fp32": ["/up", "/down"],
                       "fewest-casts": ["/up", "/down", "/squash"]},
              "fewest-casts keeps the absorbing Tanh in float32, the default prunes it", fp32)
        casts = {k: v[1] for k, v in got.items()}
        check(casts["fewest-casts"] < casts["fewest-fp32"],
              "fewest-casts converts with fewer Casts", casts)
    scaled = planned(f, ort_dir, tmp, model, inputs, want, "absorb_scaled")
    if scaled:
        plan = scaled[0]
        originals = {n.name for n in onnx.load(model).graph.node}
        check([(s["value"], s["node"]) for s in plan["scaled"]] == [("pre", "/up")] and
              len(plan["fp32_nodes"]) == 1 and plan["fp32_nodes"][0] not in originals,
              "scaling: one rewrite for /up, and only its multiply-back in float32",
              (plan["scaled"], plan["fp32_nodes"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    ap.add_argument("--examples", required=True)
    ap.add_argument("--ort-node", required=True,
                    help="onnxruntime-node's folder (scripts/setup BUILD: BUILD/ort-node)")
    a = ap.parse_args()
    f = os.path.abspath(a.fpguard)
    with tempfile.TemporaryDirectory() as tmp:
        if ortcheck.available(a.ort_node):
            fewest_casts(f, a.ort_node, tmp)
        recorded_inputs(f, tmp)
        no_refused_commands(f, a.examples, tmp)
        emit_warnings(f, a.examples, tmp)
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("all plan tests passed")


if __name__ == "__main__":
    main()
