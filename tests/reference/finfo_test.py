#!/usr/bin/python3
"""`fpguard finfo` / `fpguard iinfo` against torch.finfo / torch.iinfo, numpy.finfo /
numpy.iinfo, and an independent computation from the specification tables (fpgref).

    finfo_test.py --fpguard PATH
"""

import json
import math
import os
import sys
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fpgref  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

TORCH_FLOATS = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
NUMPY_FLOATS = {"float64": np.float64, "float32": np.float32, "float16": np.float16}
TORCH_INTS = {
    "int8": torch.int8,
    "uint8": torch.uint8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
}
NUMPY_INTS = {
    n: getattr(np, n)
    for n in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
}

# Largest finite value and smallest positive value of each named format, from the
# specification tables (IEEE 754, OCP OFP8 rev 1.0, OCP MX v1.0): written out here by
# hand, not derived, so a slip in the derivation below cannot hide.
SPEC_TABLE = {
    "float64": (1.7976931348623157e308, 2.0**-1074),
    "float32": (3.4028234663852886e38, 2.0**-149),
    "tf32": ((2 - 2.0**-10) * 2.0**127, 2.0**-136),
    "float16": (65504.0, 2.0**-24),
    "bfloat16": (3.3895313892515355e38, 2.0**-133),
    "float8_e4m3fn": (448.0, 2.0**-9),
    "float8_e4m3fnuz": (240.0, 2.0**-10),
    "float8_e5m2": (57344.0, 2.0**-16),
    "float8_e5m2fnuz": (57344.0, 2.0**-17),
    "float6_e2m3fn": (7.5, 2.0**-3),
    "float6_e3m2fn": (28.0, 2.0**-4),
    "float4_e2m1fn": (6.0, 0.5),
    "float8_e8m0fnu": (2.0**127, 2.0**-127),  # unsigned: min is 2^-127, not -max
}

CUSTOM = ["e5m7", "e6m9", "e3m2fnuz", "e3m4", "e2m1", "e8m0fn", "e3m4fnuz", "e11m10"]

# A custom spelling with a named format's parameters is that format.
SAME_AS_NAMED = {
    "e11m52": "float64",
    "e8m23": "float32",
    "e8m10": "tf32",
    "e5m10": "float16",
    "e8m7": "bfloat16",
    "e4m3fn": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
    "e5m2fnuz": "float8_e5m2fnuz",
    "e4m3fnuz": "float8_e4m3fnuz",
}
ALIASES = {
    "fp16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
    "fp32": "float32",
    "double": "float64",
    "fp8_e4m3fn": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
    "e8m0": "float8_e8m0fnu",
    "fp4": "float4_e2m1fn",
    "FP16": "float16",
}


def finfo_json(c, fpguard, *names):
    r = fpgref.run(fpguard, "finfo", "--json", *names)
    if not c.check(r.returncode == 0, f"finfo --json {' '.join(names)}", r.stderr):
        return []
    return json.loads(r.stdout)


def check_torch(c, fpguard):
    for name, dt in TORCH_FLOATS.items():
        tf = torch.finfo(dt)
        r = fpgref.run(fpguard, "finfo", name)
        c.equal(r.returncode, 0, f"finfo {name}: exit code")
        c.equal(r.stdout, str(tf) + "\n", f"finfo {name}: text equals str(torch.finfo)")
        (j,) = finfo_json(c, fpguard, name)
        for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
            c.equal(j[field], getattr(tf, field), f"finfo --json {name}: {field} vs torch")
        c.equal(j["dtype"], name, f"finfo --json {name}: dtype")


def check_numpy(c, fpguard):
    for name, t in NUMPY_FLOATS.items():
        nf = np.finfo(t)
        (j,) = finfo_json(c, fpguard, name)
        for field in ("maxexp", "minexp", "precision"):
            c.equal(j[field], int(getattr(nf, field)), f"finfo --json {name}: {field} vs numpy")
        for field in ("smallest_subnormal", "eps", "max", "min", "smallest_normal", "tiny"):
            c.equal(j[field], float(getattr(nf, field)), f"finfo --json {name}: {field} vs numpy")
        c.equal(j["bits"], nf.bits, f"finfo --json {name}: bits vs numpy")
        c.equal(j["exponent_bits"], nf.nexp, f"finfo --json {name}: exponent_bits vs numpy nexp")
        c.equal(j["mantissa_bits"], nf.nmant, f"finfo --json {name}: mantissa_bits vs numpy nmant")


def expected_fields(spec):
    """finfo fields computed from the specification model (fpgref.Spec)."""
    eps = 2.0**-spec.m
    precision = int(-math.log10(eps))
    return {
        "dtype": spec.name,
        "bits": spec.bits,
        "eps": eps,
        "max": float(spec.max),
        "min": -float(spec.max) if spec.signed else float(spec.min_positive),
        "tiny": float(spec.smallest_normal),
        "smallest_normal": float(spec.smallest_normal),
        "smallest_subnormal": float(spec.min_positive),
        "resolution": 10.0**-precision,
        "maxexp": spec.emax + 1,
        "minexp": spec.emin,
        "exponent_bits": spec.e,
        "mantissa_bits": spec.m,
        "bias": spec.bias,
        "precision": precision,
        "has_inf": spec.has_inf,
        "nan": spec.nan,
        "has_subnormals": spec.subnormals,
    }


def check_spec(c, fpguard):
    specs = fpgref.named_specs()
    listed = finfo_json(c, fpguard, "--all")
    c.equal([j["dtype"] for j in listed], [s.name for s in specs],
            "finfo --all --json: the named formats, in table order")
    by_name = {j["dtype"]: j for j in listed}
    for s in specs:
        j = by_name.get(s.name)
        if not c.check(j is not None, f"finfo --all: {s.name} listed"):
            continue
        exp = expected_fields(s)
        c.equal(sorted(j), sorted(exp), f"finfo --json {s.name}: field names")
        for k, v in exp.items():
            c.equal(j.get(k), v, f"finfo --json {s.name}: {k} vs specification model")
        tmax, tsub = SPEC_TABLE[s.name]
        c.equal(j["max"], tmax, f"finfo --json {s.name}: max vs specification table")
        c.equal(j["smallest_subnormal"], tsub,
                f"finfo --json {s.name}: smallest positive vs specification table")
        c.equal(Fraction(j["max"]), s.max, f"finfo --json {s.name}: max is exact")
    c.equal(set(SPEC_TABLE), {s.name for s in specs}, "specification table covers every format")

    for name in CUSTOM:
        s = fpgref.custom_spec(name)
        (j,) = finfo_json(c, fpguard, name) or [None]
        if j is None:
            continue
        for k, v in expected_fields(s).items():
            c.equal(j.get(k), v, f"finfo --json {name}: {k} vs specification model")

    for spelling, named in {**SAME_AS_NAMED, **ALIASES}.items():
        (j,) = finfo_json(c, fpguard, spelling) or [None]
        if j is not None:
            c.equal(j["dtype"], named, f"finfo {spelling} resolves to {named}")

    # More than one name: a table, one row per format plus a header.
    r = fpgref.run(fpguard, "finfo", "float16", "bf16")
    lines = r.stdout.splitlines()
    c.check(r.returncode == 0 and len(lines) == 3 and lines[1].split()[0] == "float16"
            and lines[2].split()[0] == "bfloat16", "finfo float16 bf16: table of two rows",
            r.stdout + r.stderr)


def check_iinfo(c, fpguard):
    for name, dt in TORCH_INTS.items():
        r = fpgref.run(fpguard, "iinfo", name)
        c.equal(r.returncode, 0, f"iinfo {name}: exit code")
        c.equal(r.stdout, str(torch.iinfo(dt)) + "\n",
                f"iinfo {name}: text equals str(torch.iinfo)")
    r = fpgref.run(fpguard, "iinfo", "--all", "--json")
    c.equal(r.returncode, 0, "iinfo --all --json: exit code")
    got = {j["dtype"]: j for j in json.loads(r.stdout)} if r.returncode == 0 else {}
    expected = {n: (int(np.iinfo(t).min), int(np.iinfo(t).max), np.iinfo(t).bits,
                    np.iinfo(t).kind == "i") for n, t in NUMPY_INTS.items()}
    expected["int4"] = (-8, 7, 4, True)
    expected["uint4"] = (0, 15, 4, False)
    c.equal(sorted(got), sorted(expected), "iinfo --all: the integer types")
    for n, (lo, hi, bits, signed) in expected.items():
        j = got.get(n)
        if not c.check(j is not None, f"iinfo --all: {n} listed"):
            continue
        c.equal(j["min"], lo, f"iinfo --json {n}: min vs numpy.iinfo")
        c.equal(j["max"], hi, f"iinfo --json {n}: max vs numpy.iinfo")
        c.equal(j["bits"], bits, f"iinfo --json {n}: bits")
        c.equal(j["is_signed"], signed, f"iinfo --json {n}: is_signed")
        r = fpgref.run(fpguard, "iinfo", "--json", n)
        c.check(r.returncode == 0 and json.loads(r.stdout) == [j], f"iinfo --json {n} alone",
                r.stdout + r.stderr)


def main():
    args = fpgref.parse_args(__doc__)
    c = fpgref.Checker("finfo_test")
    for part in (check_torch, check_numpy, check_spec, check_iinfo):
        c.run_case(part.__name__, part, c, args.fpguard)
    c.finish()


if __name__ == "__main__":
    main()
