#!/usr/bin/python3
"""fpguard's generic rounding path against torch on every float32 bit pattern.

round_dump (built next to the tests) streams the float16 / bfloat16 codes that
fpguard::round_generic + fpguard::encode give for float32 patterns 0 .. 2^32-1; this
script computes torch's `.half()` / `.bfloat16()` of the same patterns and compares them
bit for bit. For NaN inputs both only have to be NaN (payloads and signs are free).
A small sample also goes through the real binary (`fpguard round`, values and --encode).

    torch_exhaustive_test.py --fpguard PATH --round-dump PATH --format float16|bfloat16
                             [--stride N] [--chunk N]
"""

import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fpgref  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

TOTAL = 1 << 32
# code -> is NaN, from the IEEE layouts: exponent field all ones, mantissa nonzero
LAYOUT = {"float16": (0x7C00, 0x03FF), "bfloat16": (0x7F80, 0x007F)}


def torch_codes(fmt, x):
    t = torch.from_numpy(x)
    t = t.half() if fmt == "float16" else t.bfloat16()
    return t.view(torch.int16).numpy().view(np.uint16)


def is_nan_code(fmt, codes):
    exp, mant = LAYOUT[fmt]
    return ((codes & exp) == exp) & ((codes & mant) != 0)


def compare(c, fmt, bits, got, where):
    """Compares codes `got` for float32 patterns `bits` with torch; returns mismatches."""
    x = bits.view(np.float32)
    ref = torch_codes(fmt, x)
    bad = got != ref
    nan_in = np.isnan(x)
    if nan_in.any():
        bad &= ~nan_in
        bad |= nan_in & ~(is_nan_code(fmt, got) & is_nan_code(fmt, ref))
    nbad = int(np.count_nonzero(bad))
    if nbad:
        for i in np.flatnonzero(bad)[:10]:
            c.check(False, f"{where}: float32 0x{int(bits[i]):08x} ({float(x[i])!r})",
                    f"fpguard 0x{int(got[i]):04x}, torch 0x{int(ref[i]):04x}")
        c.failed += nbad - min(nbad, 10)
    c.passed += len(bits) - nbad
    return nbad


def read_exactly(stream, buf):
    """Fills the numpy array buf from stream; returns the number of bytes read."""
    view = memoryview(buf).cast("B")
    filled = 0
    while filled < len(view):
        k = stream.readinto(view[filled:])
        if not k:
            break
        filled += k
    return filled


def exhaustive(c, args):
    stride = args.stride
    count = (TOTAL + stride - 1) // stride
    chunk = min(args.chunk, count)
    cmd = [args.round_dump, args.format, "0", str(count), str(stride)]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, bufsize=0)
    try:  # a bigger pipe means fewer wake-ups of the two processes (Linux only)
        import fcntl

        fcntl.fcntl(proc.stdout.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except OSError:
        pass
    # Buffers are reused: fresh 100 MB arrays per chunk cost more in page faults than
    # the comparison itself.
    offsets = np.arange(chunk, dtype=np.uint64) * np.uint64(stride)
    idx = np.empty(chunk, dtype=np.uint64)
    bits = np.empty(chunk, dtype=np.uint32)
    got = np.empty(chunk, dtype=np.uint16)
    done = 0
    try:
        while done < count:
            n = min(chunk, count - done)
            filled = read_exactly(proc.stdout, got[:n])
            if not c.check(filled == 2 * n, "round_dump output",
                           f"ended after {done + filled // 2} of {count} codes"):
                break
            np.add(offsets[:n], np.uint64(done * stride), out=idx[:n])
            np.bitwise_and(idx[:n], np.uint64(0xFFFFFFFF), out=idx[:n])
            bits[:n] = idx[:n]
            compare(c, args.format, bits[:n], got[:n], f"generic {args.format}")
            done += n
    finally:
        proc.stdout.close()
        rc = proc.wait()
    c.equal(rc, 0, f"round_dump {' '.join(cmd[1:])}: exit code")
    print(f"{args.format}: {done} float32 patterns (stride {stride}) compared with torch in "
          f"{time.monotonic() - t0:.1f} s", flush=True)


def through_binary(c, args):
    """A sample through `fpguard round`: float32 values (the fast path where there is one)
    and --encode (float32 input)."""
    rng = np.random.default_rng(12345)
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 1,
                        0x80000001, 0x7F7FFFFF, 0xFF7FFFFF, 0x477FEFFF, 0x477FF000,
                        0x33000000, 0x33000001, 0x3F801000, 0x3F803000, 0x3F808000,
                        0x3F818000], dtype=np.uint32)
    bits = np.concatenate([special, rng.integers(0, TOTAL, 1 << 16, dtype=np.uint64)
                           .astype(np.uint32)])
    x = bits.view(np.float32).reshape(-1, 2)
    with tempfile.TemporaryDirectory() as d:
        src, vals, codes = (os.path.join(d, n) for n in ("x.npy", "v.npy", "c.npy"))
        np.save(src, x)
        r = fpgref.run(args.fpguard, "round", args.format, src, "-o", vals)
        if c.equal(r.returncode, 0, f"fpguard round {args.format} (float32): exit code"):
            v = np.load(vals)
            c.equal((v.dtype, v.shape), (np.dtype(np.float32), x.shape),
                    f"fpguard round {args.format}: output dtype and shape")
            compare(c, args.format, bits, torch_codes(args.format, v.reshape(-1)),
                    f"fpguard round {args.format} values")
        r = fpgref.run(args.fpguard, "round", args.format, src, "-o", codes, "--encode")
        if c.equal(r.returncode, 0, f"fpguard round {args.format} --encode: exit code"):
            k = np.load(codes)
            c.equal((k.dtype, k.shape), (np.dtype(np.uint16), x.shape),
                    f"fpguard round {args.format} --encode: output dtype and shape")
            compare(c, args.format, bits, k.reshape(-1), f"fpguard round {args.format} --encode")


def main():
    def extra(p):
        p.add_argument("--round-dump", required=True, help="path of the round_dump helper")
        p.add_argument("--format", required=True, choices=sorted(LAYOUT))
        p.add_argument("--stride", type=int, default=1,
                       help="test every N-th pattern only (a quick smoke run); default 1")
        p.add_argument("--chunk", type=int, default=1 << 24, help="patterns per chunk")

    args = fpgref.parse_args(__doc__, extra)
    if args.stride < 1 or args.chunk < 1:
        sys.exit("--stride and --chunk must be positive")
    torch.set_num_threads(1)  # round_dump has the other core
    c = fpgref.Checker(f"torch_exhaustive_test {args.format}")
    c.max_failures_shown = 30
    c.run_case("through the binary", through_binary, c, args)
    c.run_case("exhaustive", exhaustive, c, args)
    c.finish()


if __name__ == "__main__":
    main()
