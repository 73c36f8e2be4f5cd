#!/usr/bin/python3
"""What a transformer's feed-forward fusion saves: `run --profile` fused and with
--no-fusion, alternating, and the time per run of the nodes of the first Linear of every
feed-forward block, its bias Add and the GELU after it (names containing `ff.0/`, `ff.1/`
in bench/make_real_models.py's BERT, `mlp.0/`, `mlp.1/` in its GPT-2), fused into that
MatMul or apart, with the whole run's node time and the process's user CPU time (load,
warm-up and 10 runs: steadier than wall times on a VM whose speed drifts between minutes;
take --threads 1 for it).

    fusion_region.py FPGUARD MODEL_DIR [--rounds N] [--precision P] [--threads T]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fpguard")
    ap.add_argument("model_dir", help="a folder with model.onnx and inputs/ (a BERT or GPT-2)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--precision", default="float32")
    ap.add_argument("--threads", default="2")
    a = ap.parse_args()
    bert = "bert" in os.path.basename(os.path.normpath(a.model_dir))
    keys = ("ff.0/", "ff.1/") if bert else ("mlp.0/", "mlp.1/")
    got = {"fused": [], "apart": []}
    with tempfile.TemporaryDirectory() as tmp:
        prof = os.path.join(tmp, "profile.json")
        for _ in range(a.rounds):
            for mode in got:
                argv = [a.fpguard, "run", os.path.join(a.model_dir, "model.onnx"), "--inputs",
                        os.path.join(a.model_dir, "inputs"), "--threads", a.threads, "--repeat",
                        "10", "--warmup", "2", "--precision", a.precision, "--profile", prof]
                if mode == "apart":
                    argv.append("--no-fusion")
                before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
                subprocess.run(argv, capture_output=True, check=True)
                cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before
                with open(prof) as fh:
                    p = json.load(fh)
                region = sum(n["ms"] for n in p["nodes"] if any(k in n["name"] for k in keys))
                got[mode].append((region, p["total_ms"], cpu))
    for mode, v in got.items():
        med = [statistics.median(x[i] for x in v) for i in range(3)]
        print(f"{mode:6} feed-forward Linear + bias + GELU {med[0]:8.2f} ms   all nodes {med[1]:8.2f} ms"
              f"   user CPU {med[2]:6.3f} s  (medians of {a.rounds})")


if __name__ == "__main__":
    main()
