#!/usr/bin/python3
"""What `fpguard plan --objective fewest-casts` costs over the default objective: it counts
the Casts of each configuration the pruning keeps (one in-memory convert per count). A/B in
one run, the two objectives interleaved, `REPS` times each, on the bench models (as they
are: one pass; and at cosine >= 0.9999999, which makes the search grow and prune), the
transformer_block example with `--scale none` and the Scan RNN cell of
tests/cli/control_flow_test.py. Prints one Markdown row per model.

    bench/plan_objectives.py BUILD_DIR [REPS]"""
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "cli"))
import control_flow_test  # noqa: E402  (builds the control-flow models)


def plan(fpguard, model, inputs, objective, extra):
    start = time.perf_counter()
    r = subprocess.run([fpguard, "plan", model, "--inputs", inputs, "--precision", "fp16",
                        "--quiet", "--threads", "2", "--objective", objective, *extra],
                       capture_output=True, text=True)
    seconds = time.perf_counter() - start
    first = r.stdout.splitlines()[0] if r.stdout else r.stderr.strip()
    m = re.search(r"(\d+) of (\d+) floating nodes in float16.*?(\d+) casts, (\d+) pass", first)
    return seconds, (m.groups() if m else (first,))


def main():
    build = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    fpguard = os.path.join(build, "fpguard")
    models = os.path.join(build, "bench", "models")
    cases = []
    for name in ("mlp", "resnet", "superres256", "transformer"):
        m, i = os.path.join(models, name, "model.onnx"), os.path.join(models, name, "inputs")
        cases += [(name, m, i, []),
                  (name + " (cos >= 0.9999999)", m, i, ["--min-cosine", "0.9999999",
                                                        "--max-passes", "16"])]
    ex = os.path.join(HERE, "..", "examples", "transformer_block")
    cases.append(("transformer_block (--scale none)", os.path.join(ex, "model.onnx"),
                  os.path.join(ex, "inputs"), ["--scale", "none"]))
    with tempfile.TemporaryDirectory() as tmp:
        rnn, rnn_in, _ = control_flow_test.scan_rnn_model(tmp)
        cases.append(("Scan RNN cell (control_flow_test)", rnn, rnn_in, []))
        print("| model | fewest-fp32 s | fewest-casts s | fewest-fp32: fp16 nodes, casts, passes "
              "| fewest-casts: fp16 nodes, casts, passes |")
        print("|---|---|---|---|---|")
        for label, model, inputs, extra in cases:
            times = {"fewest-fp32": [], "fewest-casts": []}
            shape = {}
            for _ in range(reps):
                for objective in times:
                    s, g = plan(fpguard, model, inputs, objective, extra)
                    times[objective].append(s)
                    shape[objective] = g
            cells = [" / ".join(f"{s:.2f}" for s in times[o]) for o in times]
            kept = []
            for o in times:
                g = shape[o]
                kept.append(f"{g[0]} of {g[1]}, {g[2]}, {g[3]}" if len(g) == 4 else g[0])
            print(f"| {label} | {cells[0]} | {cells[1]} | {kept[0]} | {kept[1]} |", flush=True)


if __name__ == "__main__":
    main()
