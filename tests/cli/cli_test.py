#!/usr/bin/python3
"""End-to-end tests of the real `fpguard` binary: help and version, `finfo` output shapes,
every kind of bad input (one line on stderr, "fpguard: error: ...", exit 2, no output
file left behind, inputs untouched), and `round` results (dtypes, shapes, values,
reproducible stochastic rounding).

    cli_test.py --fpguard PATH
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import fpgref  # noqa: E402

import numpy as np  # noqa: E402

SUBCOMMANDS = ["finfo", "iinfo", "round"]  # at least these; more are found in --help


class Cli:
    def __init__(self, c, fpguard, tmp):
        self.c, self.fpguard, self.tmp = c, fpguard, tmp

    def path(self, name):
        return os.path.join(self.tmp, name)

    def run(self, *argv):
        return fpgref.run(self.fpguard, *argv, cwd=self.tmp)

    def listing(self):
        out = []
        for root, _, files in os.walk(self.tmp):
            out += [os.path.relpath(os.path.join(root, f), self.tmp) for f in files]
        return sorted(out)

    def fails(self, case, argv, *needles, untouched=()):
        """argv must fail with exit 2 and exactly one line on stderr,
        'fpguard: error: ...' containing every needle; the directory must not change
        (no output, no temporary file) and the files `untouched` keep their bytes."""
        before = self.listing()
        saved = {p: open(self.path(p), "rb").read() for p in untouched}
        r = self.run(*argv)
        c = self.c
        c.equal(r.returncode, 2, f"{case}: exit code")
        lines = r.stderr.splitlines()
        c.check(len(lines) == 1, f"{case}: one line on stderr", repr(r.stderr))
        c.check(r.stderr.startswith("fpguard: error: "), f"{case}: stderr prefix", repr(r.stderr))
        for n in needles:
            c.check(n in r.stderr, f"{case}: stderr names the problem ({n!r})", repr(r.stderr))
        c.equal(r.stdout, "", f"{case}: nothing on stdout")
        c.equal(self.listing(), before, f"{case}: no file created or removed")
        for p, data in saved.items():
            c.check(open(self.path(p), "rb").read() == data, f"{case}: {p} byte-identical")
        return r

    def ok(self, case, argv):
        r = self.run(*argv)
        self.c.check(r.returncode == 0, f"{case}: exit 0", f"exit {r.returncode}: {r.stderr}")
        return r


def check_help(c, cli):
    r = cli.ok("--version", ["--version"])
    c.check(re.fullmatch(r"fpguard \d+\.\d+\.\d+\S*\n", r.stdout) is not None, "--version output",
            repr(r.stdout))
    r = cli.ok("--help", ["--help"])
    c.check("Usage" in r.stdout or "usage" in r.stdout, "--help: usage", r.stdout)
    parts = re.split(r"^subcommands:\s*$", r.stdout, flags=re.M | re.I)
    listed = set(re.findall(r"^\s+([a-z][a-z0-9-]*)\s{2,}", parts[-1], re.M)) \
        if len(parts) == 2 else set()
    for s in SUBCOMMANDS:
        c.check(s in listed, f"--help lists {s}", r.stdout)
    for s in sorted(listed | set(SUBCOMMANDS)):
        for flag in ("--help", "-h"):
            r = cli.ok(f"{s} {flag}", [s, flag])
            c.check(s in r.stdout and ("Usage" in r.stdout or "usage" in r.stdout),
                    f"{s} {flag}: usage text", r.stdout)
            c.equal(r.stderr, "", f"{s} {flag}: nothing on stderr")


def check_openmp_wait(c, cli):
    """OpenMP threads spin libgomp's default 300,000 iterations when every thread finds a free
    CPU at the start, else 1000, then sleep, while they wait unless the user chose
    (include/fpguard/limits.hpp): libgomp prints the spin count it runs with under
    OMP_DISPLAY_ENV=verbose, once per process that loads it (the first, then a re-executed
    one). Only the commands that run models may start again; the others keep libgomp's
    default and start once. With a busy loop on every CPU a bounded spin is certain; without,
    either is right (this test's neighbours may be running)."""
    def spin_counts(args, **env):
        e = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
        e.update(env, OMP_DISPLAY_ENV="verbose")
        r = subprocess.run([cli.fpguard] + args, capture_output=True, text=True, env=e,
                           timeout=60)
        c.check(r.returncode == 0, f"{args} with {env}: exit 0", r.stderr)
        return re.findall(r"GOMP_SPINCOUNT = '(\d+)'", r.stderr)
    default = spin_counts(["--version"])
    c.check(len(default) == 1 and default[0] == "300000", "libgomp's default: 300000", default)
    commands = ["run", "check", "plan", "convert", "calibrate", "accum", "gemm-error"]
    busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"])
            for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.1)
        for command in commands:
            counts = spin_counts([command, "--help"])
            c.check(len(counts) == 2 and counts[-1] == "1000",
                    f"{command}, every CPU busy: started again with a bounded spin (1000)",
                    counts)
        for args in [["--version"], ["round", "--help"], ["merge", "--help"],
                     ["inspect", "--help"], ["finfo", "float16"]]:
            c.equal(spin_counts(args), default,
                    f"{args}, every CPU busy: started once, libgomp's default")
    finally:
        for p in busy:
            p.kill()
            p.wait()
    for command in commands:
        counts = spin_counts([command, "--help"])
        c.check(counts == default or (len(counts) == 2 and counts[-1] == "1000"),
                f"{command}: libgomp's default, or started again with a bounded spin", counts)
    c.equal(spin_counts(["run", "--help"], GOMP_SPINCOUNT="1234"), ["1234"],
            "GOMP_SPINCOUNT is the user's")
    active = spin_counts(["check", "--help"], OMP_WAIT_POLICY="active")
    c.check(len(active) == 1 and int(active[0]) > 300000, "OMP_WAIT_POLICY=active is kept",
            active)


def check_finfo(c, cli):
    names = [j["dtype"] for j in json.loads(cli.ok("finfo --all --json",
                                                   ["finfo", "--all", "--json"]).stdout)]
    c.equal(len(names), 13, "finfo --all --json: 13 named formats")
    r = cli.ok("finfo --all", ["finfo", "--all"])
    rows = r.stdout.splitlines()
    c.check(rows and rows[0].split()[0] == "dtype", "finfo --all: header row", r.stdout)
    c.equal([row.split()[0] for row in rows[1:]], names, "finfo --all: one row per named format")
    r = cli.ok("finfo e5m7", ["finfo", "e5m7"])
    c.check(r.stdout.startswith("finfo(") and "dtype=e5m7)" in r.stdout, "finfo e5m7: output",
            r.stdout)
    (j,) = json.loads(cli.ok("finfo --json e5m7", ["finfo", "--json", "e5m7"]).stdout)
    c.equal((j["exponent_bits"], j["mantissa_bits"], j["bias"], j["bits"]), (5, 7, 15, 13),
            "finfo --json e5m7: fields")
    r = cli.ok("iinfo int4", ["iinfo", "int4"])
    c.equal(r.stdout, "iinfo(min=-8, max=7, dtype=int4)\n", "iinfo int4: output")


def check_errors(c, cli):
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    np.save(cli.path("x.npy"), x)
    np.save(cli.path("x64.npy"), x.astype(np.float64))
    good = cli.path("x.npy")
    out = cli.path("out.npy")
    rnd = ["round", "float16", good, "-o", out]

    cli.fails("unknown format (round)", ["round", "flaot16", good, "-o", out],
              "flaot16", "did you mean 'float16'")
    cli.fails("unknown format (finfo)", ["finfo", "flaot16"], "flaot16", "did you mean 'float16'")
    cli.fails("unknown format, no close name", ["finfo", "posit32"], "posit32", "unknown format")
    cli.fails("unknown subcommand", ["fino", "float16"], "fino", "did you mean 'finfo'")
    # `fpguard` alone: the short usage (every command, one line each), exit 2.
    r = cli.run()
    c.equal(r.returncode, 2, "no command: exit 2")
    c.check(r.stderr.startswith("usage: fpguard COMMAND") and "\n  check " in r.stderr
            and "\n  convert " in r.stderr, "no command: the short usage", r.stderr)
    # CLI11's parse errors, worded as ours: what is wrong where, with a "did you mean" over
    # the options of the command (the global ones included), "fpguard" said once.
    cli.fails("misspelt option", ["finfo", "float16", "--jsno"], "error: --jsno: ",
              "unknown option of finfo", "did you mean '--json'")
    cli.fails("misspelt global option", ["finfo", "float16", "--max-memroy", "1G"],
              "--max-memroy", "did you mean '--max-memory'")
    cli.fails("misspelt option before the command", ["--max-memroy", "1G", "finfo"],
              "--max-memroy", "did you mean '--max-memory'")
    cli.fails("a one-letter option is no typo", ["finfo", "float16", "-z"], "-z",
              "unknown option of finfo (see fpguard finfo --help)")
    cli.fails("one positional too many", rnd + ["extra"], "error: round: ",
              "unexpected argument 'extra'")
    cli.fails("missing positional", ["round", "float16"], "error: round: ", "input is required")
    cli.fails("option without its value", ["round", "float16", good, "-o"],
              "error: --output: ", "expects a value")
    for bad in (["round"], ["round", "float16", good, "--bogus"], ["round", "float16"]):
        r = cli.run(*bad)
        c.check("fpguard: error: fpguard" not in r.stderr, f"{bad}: 'fpguard' said once",
                r.stderr)
    cli.fails("malformed custom format e12m3", ["round", "e12m3", good, "-o", out],
              "e12m3", "exponent bits")
    cli.fails("malformed custom format e5m53", ["round", "e5m53", good, "-o", out],
              "e5m53", "mantissa bits")
    cli.fails("malformed custom format e5m0", ["finfo", "e5m0"], "e5m0")
    cli.fails("unknown integer type", ["iinfo", "int7"], "int7")
    cli.fails("unknown rounding mode", rnd + ["--rounding", "nearest_even"],
              "nearest_even", "unknown rounding mode", "did you mean 'nearest-even'")
    cli.fails("unknown rounding mode, no close name", rnd + ["--rounding", "banker"],
              "banker", "unknown rounding mode")
    cli.fails("missing input file", ["round", "float16", cli.path("nope.npy"), "-o", out],
              "nope.npy")
    cli.fails("input is a directory", ["round", "float16", cli.tmp, "-o", out])
    cli.fails("unknown flag", rnd + ["--bogus"], "--bogus")
    cli.fails("missing -o", ["round", "float16", good], "-o")
    cli.fails("bad --seed", rnd + ["--rounding", "stochastic", "--seed", "abc"], "abc")

    # malformed inputs
    blob = open(good, "rb").read()
    with open(cli.path("trunc.npy"), "wb") as f:
        f.write(blob[:-5])
    cli.fails("truncated .npy data", ["round", "float16", "trunc.npy", "-o", out],
              "trunc.npy", "truncated")
    with open(cli.path("trunchdr.npy"), "wb") as f:
        f.write(blob[:30])
    cli.fails("truncated .npy header", ["round", "float16", "trunchdr.npy", "-o", out],
              "trunchdr.npy", "truncated")
    with open(cli.path("notnpy.npy"), "wb") as f:
        f.write(b"hello, world\n")
    cli.fails("not a .npy", ["round", "float16", "notnpy.npy", "-o", out], "notnpy.npy")
    open(cli.path("empty.npy"), "wb").close()
    cli.fails("empty file", ["round", "float16", "empty.npy", "-o", out], "empty.npy")
    np.save(cli.path("fortran.npy"), np.asfortranarray(x))
    cli.fails("Fortran-order .npy", ["round", "float16", "fortran.npy", "-o", out],
              "fortran.npy", "Fortran")
    np.save(cli.path("complex.npy"), x.astype(np.complex64))
    cli.fails("complex64 .npy", ["round", "float16", "complex.npy", "-o", out],
              "complex.npy", "dtype")
    np.save(cli.path("int32.npy"), np.arange(6, dtype=np.int32))
    cli.fails("int32 .npy for round", ["round", "float16", "int32.npy", "-o", out],
              "int32.npy", "int32")
    np.save(cli.path("f16.npy"), x.astype(np.float16))
    cli.fails("float16 .npy for round", ["round", "bf16", "f16.npy", "-o", out],
              "f16.npy", "float16")
    np.save(cli.path("obj.npy"), np.array([1, "a"], dtype=object), allow_pickle=True)
    cli.fails("object .npy", ["round", "float16", "obj.npy", "-o", out], "obj.npy")

    # the input is never overwritten, however the output names it
    for spelling in (good, "x.npy", "./x.npy", os.path.join(cli.tmp, ".", "x.npy")):
        cli.fails(f"output is the input ({spelling})", ["round", "float16", good, "-o", spelling],
                  "input", untouched=["x.npy"])
    os.symlink(good, cli.path("link.npy"))
    cli.fails("output is a symlink to the input", ["round", "float16", good, "-o", "link.npy"],
              "input", untouched=["x.npy"])
    os.link(good, cli.path("hard.npy"))
    cli.fails("output is a hard link to the input",
              ["round", "float16", "x.npy", "-o", "hard.npy"], "input", untouched=["x.npy"])
    cli.fails("output in a missing directory",
              ["round", "float16", good, "-o", cli.path("nodir/out.npy")], "nodir",
              "does not exist")
    cli.fails("output is a directory", ["round", "float16", good, "-o", cli.tmp], cli.tmp)
    c.check(not os.path.exists(out), "no output left by any failure")


def load_ok(c, cli, case, argv, out):
    if os.path.exists(out):
        os.remove(out)
    r = cli.run(*argv)
    if not c.check(r.returncode == 0, f"{case}: exit 0", f"exit {r.returncode}: {r.stderr}"):
        return None
    c.equal(r.stderr, "", f"{case}: nothing on stderr")
    return np.load(out)


def check_round(c, cli):
    rng = np.random.default_rng(7)
    out = cli.path("r.npy")
    shapes = [(), (0,), (5,), (2, 3, 4), (1, 0, 3)]
    for shape in shapes:
        for dt in (np.float32, np.float64):
            x = (rng.standard_normal(shape) * 100).astype(dt)
            src = cli.path(f"in_{dt.__name__}_{len(shape)}.npy")
            np.save(src, x)
            case = f"round float16 {dt.__name__} {shape}"
            y = load_ok(c, cli, case, ["round", "float16", src, "-o", out], out)
            if y is not None:
                c.equal((y.dtype, y.shape), (np.dtype(dt), shape), f"{case}: dtype and shape")
                c.check(np.array_equal(y, x.astype(np.float16).astype(dt)),
                        f"{case}: values equal numpy's float16 rounding", f"{x} -> {y}")
            for fmt, code in (("float8_e4m3fn", np.uint8), ("float16", np.uint16),
                              ("bf16", np.uint16), ("fp4", np.uint8), ("e5m7", np.uint16),
                              ("float32", np.uint32), ("float64", np.uint64),
                              ("e8m0", np.uint8)):
                case = f"round {fmt} --encode {dt.__name__} {shape}"
                y = load_ok(c, cli, case, ["round", fmt, src, "-o", out, "--encode"], out)
                if y is not None:
                    c.equal((y.dtype, y.shape), (np.dtype(code), shape),
                            f"{case}: dtype and shape")
            if shape == (2, 3, 4):
                y = load_ok(c, cli, "encode float16 values", ["round", "float16", src, "-o", out,
                                                              "--encode"], out)
                if y is not None:
                    c.check(np.array_equal(y, x.astype(np.float16).view(np.uint16)),
                            f"round float16 --encode {dt.__name__}: numpy's float16 bits")
                y = load_ok(c, cli, "float32 identity", ["round", "float32", src, "-o", out], out)
                if y is not None:
                    c.check(np.array_equal(y, x.astype(np.float32).astype(dt)),
                            f"round float32 {dt.__name__}: values")

    # big-endian input is read correctly
    x = (rng.standard_normal(50) * 10).astype(">f8")
    np.save(cli.path("be.npy"), x)
    y = load_ok(c, cli, "big-endian float64", ["round", "float16", "be.npy", "-o", out], out)
    if y is not None:
        c.check(np.array_equal(y, x.astype(np.float16).astype(np.float64)),
                "big-endian float64: values")

    # an existing output (not the input) is replaced
    np.save(out, np.zeros(3))
    y = load_ok(c, cli, "existing output", ["round", "float16", "be.npy", "-o", out], out)
    c.check(y is not None and y.shape == (50,), "existing output is replaced")

    # stochastic rounding: reproducible with the same seed, different with another;
    # each result is one of the two neighbours
    # halfway points between the float16 values of [1, 2): neighbours x -+ 2^-11
    x = (1 + (np.arange(1024, dtype=np.float32) + 0.5) * 2.0**-10).astype(np.float32)
    np.save(cli.path("st.npy"), x)
    runs = {}
    for seed in (1, 1, 2):
        for dt, src in (("float32", "st.npy"),):
            argv = ["round", "float16", src, "-o", out, "--rounding", "stochastic",
                    "--seed", str(seed)]
            y = load_ok(c, cli, f"stochastic seed {seed}", argv, out)
            if y is not None:
                runs.setdefault(seed, []).append(y)
    if len(runs.get(1, [])) == 2 and runs.get(2):
        c.check(np.array_equal(runs[1][0], runs[1][1]), "stochastic: same seed, same result")
        c.check(not np.array_equal(runs[1][0], runs[2][0]), "stochastic: another seed differs")
        y = runs[1][0]
        c.check(np.all((y == x - 2.0**-11) | (y == x + 2.0**-11)),
                "stochastic: one of the two neighbours")
        ups = np.count_nonzero(y > x)
        c.check(400 < ups < 624, "stochastic: about half of the halfway points round up",
                f"{ups} of 1024")
    # the stochastic draw is per element index, so float32 and float64 inputs agree
    np.save(cli.path("st64.npy"), x.astype(np.float64))
    y64 = load_ok(c, cli, "stochastic float64", ["round", "float16", "st64.npy", "-o", out,
                                                 "--rounding", "stochastic", "--seed", "1"], out)
    if y64 is not None and runs.get(1):
        c.check(np.array_equal(y64, runs[1][0].astype(np.float64)),
                "stochastic: float32 and float64 inputs draw the same")

    # the summary line names the output and the counts
    np.save(cli.path("ov.npy"), np.array([1e6, -1e6, 1.0, np.nan, 1e-30], dtype=np.float32))
    r = cli.ok("round summary", ["round", "float16", "ov.npy", "-o", out])
    c.check("2 overflowed" in r.stdout and "1 NaN" in r.stdout and "1 underflowed" in r.stdout,
            "round summary: counts", r.stdout)
    y = np.load(out)
    c.check(np.isinf(y[0]) and np.isinf(y[1]) and y[1] < 0 and y[2] == 1 and np.isnan(y[3])
            and y[4] == 0, "round float16: overflow to inf, NaN kept", str(y))
    y = load_ok(c, cli, "round --saturate", ["round", "float16", "ov.npy", "-o", out,
                                             "--saturate"], out)
    if y is not None:
        c.check(y[0] == 65504 and y[1] == -65504, "round --saturate: +-max", str(y))
    y = load_ok(c, cli, "round e4m3fn codes", ["round", "float8_e4m3fn", "ov.npy", "-o", out,
                                               "--encode"], out)
    if y is not None:
        c.equal(y.tolist(), [0x7F, 0x7F, 0x38, 0x7F, 0x00], "round float8_e4m3fn --encode: codes")


def check_round_storage(c, cli):
    """--dtype chooses what the values are written as; a large file streams (pieces of 2^20
    elements) with the same values, counts and stochastic draws as NumPy and as a small file."""
    rng = np.random.default_rng(11)
    out = cli.path("d.npy")
    n = 2_500_000  # three pieces
    x = (rng.standard_normal(n) * 3e4).astype(np.float32)
    # (65504 < |x| < 65520 rounds to max: no overflow.)
    x[:8] = [np.nan, np.inf, -0.0, 1e-9, 70000, -1e6, 65510, -65519]
    np.save(cli.path("big.npy"), x)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    # --max-memory far below the file: round holds a few pieces, never the whole array.
    r = cli.ok("--dtype float16", ["round", "float16", "big.npy", "-o", out, "--dtype", "float16",
                                   "--max-memory", "1M"])
    y = np.load(out)
    c.check(y.dtype == np.float16 and np.array_equal(y.view(np.uint16), want.view(np.uint16)),
            "--dtype float16: a real <f2 .npy, numpy's float16 bits")
    finite = np.isfinite(x)
    # Overflow (IEEE's, as NumPy's float16 cast raises it): the finite values it makes inf.
    over = int(np.count_nonzero(finite & ~np.isfinite(want)))
    changed = int(np.count_nonzero((want.astype(np.float32) != x) & ~np.isnan(x)))
    under = int(np.count_nonzero((x != 0) & (want == 0)))
    c.check(f"{n} float32 values" in r.stdout and f"{changed} changed" in r.stdout and
            f"{over} overflowed" in r.stdout and f"{under} underflowed" in r.stdout and
            "1 NaN" in r.stdout and "wrote float16 values" in r.stdout,
            "--dtype float16: the counts NumPy finds", (r.stdout, changed, over, under))
    y = load_ok(c, cli, "streamed float32", ["round", "float16", "big.npy", "-o", out], out)
    if y is not None:
        c.check(np.array_equal(y.view(np.uint32), want.astype(np.float32).view(np.uint32)),
                "a streamed file: numpy's values")
    # FP8 values in float16 and bfloat16 (as float32) storage: the same values as float32.
    y32 = load_ok(c, cli, "e4m3 float32", ["round", "float8_e4m3fn", "big.npy", "-o", out], out)
    for dtype, npt in (("float16", np.float16), ("bfloat16", np.float32)):
        y = load_ok(c, cli, f"e4m3 --dtype {dtype}",
                    ["round", "float8_e4m3fn", "big.npy", "-o", out, "--dtype", dtype], out)
        if y is not None and y32 is not None:
            c.check(y.dtype == npt and np.array_equal(y.astype(np.float32), y32, equal_nan=True),
                    f"float8_e4m3fn --dtype {dtype}: the same values")
    # Stochastic draws are per element index, whatever the pieces: the same halfway values
    # at i and i + 2^20 (in two pieces) round up independently, about half of them apart.
    piece = 1 << 20
    h = (1 + (np.arange(piece) % 1024 + 0.5) * 2.0**-10).astype(np.float32)
    np.save(cli.path("halves.npy"), np.concatenate([h, h]))
    y = load_ok(c, cli, "streamed stochastic", ["round", "float16", "halves.npy", "-o", out,
                                                "--rounding", "stochastic", "--seed", "5"], out)
    if y is not None:
        apart = np.count_nonzero(y[:piece] != y[piece:]) / piece
        c.check(0.45 < apart < 0.55, "stochastic: the second piece draws anew", apart)
        c.check(np.all(np.abs(y - np.concatenate([h, h])) == 2.0**-11),
                "stochastic: one of the two neighbours, in every piece")
    # Refused: a dtype that cannot hold the format's values, --dtype with --encode.
    cli.fails("--dtype float16 for bfloat16 values",
              ["round", "bf16", "big.npy", "-o", out, "--dtype", "float16"],
              "--dtype float16", "cannot hold every bfloat16 value")
    cli.fails("--dtype with --encode",
              ["round", "float16", "big.npy", "-o", out, "--dtype", "float16", "--encode"],
              "--dtype", "--encode")
    cli.fails("--dtype int8", ["round", "float16", "big.npy", "-o", out, "--dtype", "int8"],
              "int8")


def main():
    args = fpgref.parse_args(__doc__)
    c = fpgref.Checker("cli_test")
    with tempfile.TemporaryDirectory() as tmp:
        cli = Cli(c, os.path.abspath(args.fpguard), tmp)
        for part in (check_help, check_openmp_wait, check_finfo, check_errors, check_round, check_round_storage):
            c.run_case(part.__name__, part, c, cli)
    c.finish()


if __name__ == "__main__":
    main()
