#!/usr/bin/python3
"""Peak memory of whole commands against the model's size (issue 20, item 4): for each
model folder (model.onnx [+ model.onnx.data], inputs/), `fpguard run` and `fpguard check
--precision float16` of each given binary, one after the other, and the peak resident
set of each (`wait4`'s ru_maxrss: mapped file pages that were read count, as they do in
RSS). The model's size is that of model.onnx plus its external data.

    peak_memory.py FPGUARD [FPGUARD ...] --models DIR [DIR ...] [--threads N]

Prints a Markdown table: model, size, and per binary the peak of run and check in MiB
and as a multiple of the size."""
import argparse
import os
import subprocess
import sys
import tempfile
import time


def peak(argv):
    """(exit status, peak RSS in bytes, wall seconds) of one command."""
    t = time.monotonic()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)  # (Popen must not wait again)
        if p.returncode not in (0, 1):
            err.seek(0)
            sys.exit(f"{' '.join(argv)}: exit {p.returncode}: {err.read().decode()}")
    return usage.ru_maxrss * 1024, time.monotonic() - t


def model_bytes(folder):
    return sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)
               if f.startswith("model.onnx"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fpguard", nargs="+")
    ap.add_argument("--models", nargs="+", required=True)
    ap.add_argument("--threads", default="2")
    a = ap.parse_args()
    mib = 1 << 20
    head = "| model | size MiB |" + "".join(f" {b}: run | check |" for b in a.fpguard)
    print(head)
    print("|---|---|" + "---|---|" * len(a.fpguard))
    for folder in a.models:
        size = model_bytes(folder)
        model, inputs = os.path.join(folder, "model.onnx"), os.path.join(folder, "inputs")
        row = f"| {os.path.basename(os.path.normpath(folder))} | {size / mib:.0f} |"
        for b in a.fpguard:
            r, _ = peak([b, "run", model, "--inputs", inputs, "--threads", a.threads])
            c, _ = peak([b, "check", model, "--inputs", inputs, "--threads", a.threads,
                         "--precision", "float16", "--quiet"])
            row += f" {r / mib:.0f} ({r / size:.2f}x) | {c / mib:.0f} ({c / size:.2f}x) |"
        print(row, flush=True)


if __name__ == "__main__":
    main()
