#!/usr/bin/python3
"""Writes the malformed inputs of the bad-input suite (tests/badinput/cases.txt) into
tests/badinput/files/, and a selection of them (plus option strings) as the seeds of the
fuzz regression folders tests/regressions/<harness>/. Run once with Debian's /usr/bin/python3 (numpy, onnx) and commit
the output; running it again rewrites the same bytes (no timestamps, no randomness, .npy
headers and zip archives written field by field), which `--check` verifies.

    make_badinput.py [--check]
"""
import os
import struct
import sys
import zlib

from onnx import TensorProto

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "files")

# ---- .npy ----------------------------------------------------------------------------


def npy(header, data=b"", version=1, hlen=None, pad=True):
    """A .npy file with the literal header text `header` (padded as NumPy does)."""
    h = header.encode("latin1") if isinstance(header, str) else header
    prefix = 10 if version == 1 else 12
    if pad:
        h += b" " * ((64 - (prefix + len(h) + 1) % 64) % 64) + b"\n"
    n = len(h) if hlen is None else hlen
    size = struct.pack("<H", n) if version == 1 else struct.pack("<I", n)
    return b"\x93NUMPY" + bytes([version, 0]) + size + h + data


def hdr(descr="<f4", shape="(3,)", fortran="False"):
    return "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)


F32_3 = struct.pack("<3f", 1.0, -2.5, 65504.0)


def npy_cases():
    good = npy(hdr(), F32_3)
    return {
        "good.npy": good,
        "bad_magic.npy": b"\x93NUMPX" + good[6:],
        "bad_version.npy": good[:6] + b"\x09\x00" + good[8:],
        "empty.npy": b"",
        "truncated_header.npy": good[:9],
        "header_past_eof.npy": npy(hdr(), b"", hlen=500),
        "huge_header_len.npy": npy(hdr(), F32_3, version=2, hlen=0xFFFFFFF0),
        "non_ascii_header.npy": npy(hdr().replace("}", "'\xe9': 1, }"), F32_3),
        "newline_in_descr.npy": npy(hdr(descr="<f\n4"), F32_3),
        "unknown_descr.npy": npy(hdr(descr="<x4"), F32_3),
        "object.npy": npy(hdr(descr="|O"), b"\0" * 24),
        "complex128.npy": npy(hdr(descr="<c16", shape="(1,)"), b"\0" * 16),
        "unicode.npy": npy(hdr(descr="<U3", shape="(1,)"), b"\0" * 12),
        "fortran.npy": npy(hdr(shape="(3, 1)", fortran="True"), F32_3),
        "fortran_maybe.npy": npy(hdr(fortran="maybe"), F32_3),
        "no_shape.npy": npy("{'descr': '<f4', 'fortran_order': False, }", F32_3),
        "unclosed_shape.npy": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, }",
                                  F32_3),
        "bad_shape.npy": npy(hdr(shape="(3, x)"), F32_3),
        "shape_larger_than_data.npy": npy(hdr(shape="(1000,)"), F32_3),
        "data_longer_than_shape.npy": npy(hdr(shape="(2,)"), F32_3),
        "truncated_data.npy": good[:-5],
        "terabytes.npy": npy(hdr(descr="<f8", shape="(1000000, 1000000, 1000)"), F32_3),
        "negative_dim.npy": npy(hdr(shape="(3, -2)"), F32_3),
        "overflowing_dims.npy": npy(hdr(shape="(4294967296, 4294967296, 16)"), F32_3),
        "dim_too_big.npy": npy(hdr(shape="(99999999999999999999,)"), F32_3),
        "int32.npy": npy(hdr(descr="<i4"), struct.pack("<3i", 1, 2, 3)),
        "big_endian.npy": npy(hdr(descr=">f8", shape="(3,)"), struct.pack(">3d", 1.0, -2.5, 1000.0)),
        "large.npy": npy(hdr(shape="(1024,)"), b"\0" * 4096),
    }


# ---- zip (.npz) ----------------------------------------------------------------------


def zip_archive(entries):
    """entries: dicts with name, data (as stored), method (0 store, 8 deflate), crc,
    size (declared uncompressed size) and zip64 (declare sizes in a zip64 extra field).
    Fixed 1980-01-01 timestamps, no extras otherwise: the same bytes every time."""
    out = b""
    central = b""
    for e in entries:
        name = e["name"].encode()
        data = e["data"]
        crc = e.get("crc", zlib.crc32(e.get("plain", data)))
        size = e.get("size", len(e.get("plain", data)))
        zip64 = e.get("zip64", False)
        csize32, size32 = (0xFFFFFFFF, 0xFFFFFFFF) if zip64 else (len(data), size)
        extra = struct.pack("<HHQQ", 1, 16, size, len(data)) if zip64 else b""
        version = 45 if zip64 else 20
        offset = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, version, 0, e["method"], 0, 0x21, crc,
                           csize32, size32, len(name), len(extra)) + name + extra + data
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, version, version, 0,
                               e["method"], 0, 0x21, crc, csize32, size32, len(name),
                               len(extra), 0, 0, 0, 0, offset) + name + extra
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries),
                       len(central), len(out), 0)
    return out + central + eocd


def deflate(b):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(b) + c.flush()


def stored(name, plain, **kw):
    return dict(name=name, data=plain, method=0, **kw)


def deflated(name, plain, **kw):
    return dict(name=name, data=deflate(plain), plain=plain, method=8, **kw)


def npz_cases():
    x = npy(hdr(), F32_3)
    good = zip_archive([stored("x.npy", x)])
    corrupt = bytearray(zip_archive([stored("x.npy", x)]))
    corrupt[30 + len("x.npy") + len(x) - 1] ^= 0x40  # last data byte: the CRC no longer fits
    ten_mb = npy(hdr(shape="(2500000,)"), b"\0" * 10_000_000)
    return {
        "good.npz": good,
        "not_a_zip.npz": b"this is not a zip archive\n",
        "empty.npz": b"",
        "truncated.npz": good[: len(good) // 2],
        "corrupt_crc.npz": bytes(corrupt),
        "not_npy_entry.npz": zip_archive([stored("x.npy", x), stored("readme.txt", b"hi\n")]),
        "duplicate_entry.npz": zip_archive([stored("x.npy", x), stored("x.npy", x)]),
        "bad_entry.npz": zip_archive([stored("x.npy", b"\x93NUMPX" + x[6:])]),
        # declares 1 TiB (zip64) for 30 compressed bytes: refused before any inflating
        "bomb_zip64.npz": zip_archive([deflated("x.npy", x, size=1 << 40, zip64=True)]),
        # declares 4 GiB - 2 for a few dozen compressed bytes, and its header claims as
        # much (1073741790 float32): more than deflate can expand, refused before the
        # 4 GiB tensor is allocated
        "bomb_ratio.npz": zip_archive([deflated("x.npy", npy(hdr(shape="(1073741790,)"), F32_3),
                                                size=0xFFFFFFFE)]),
        # an honest 10 MB of zeros in ~10 KB: within the ratio, over a small --max-memory
        "bomb_10mb.npz": zip_archive([deflated("x.npy", ten_mb)]),
        # declares 40 bytes but inflates to 10 MB: reading stops at the declared size
        "bomb_lying_size.npz": zip_archive([deflated("x.npy", ten_mb, size=40)]),
    }


# ---- ONNX TensorProto (.pb) ----------------------------------------------------------


def tensor(name="t", dims=(3,), data_type=TensorProto.FLOAT, raw=F32_3, **fields):
    t = TensorProto()
    t.name = name
    t.dims.extend(dims)
    t.data_type = data_type
    if raw is not None:
        t.raw_data = raw
    for k, v in fields.items():
        if isinstance(v, list):
            getattr(t, k).extend(v)
        else:
            setattr(t, k, v)
    return t


def pb_cases():
    good = tensor().SerializeToString()
    ext = tensor(raw=None, data_location=TensorProto.EXTERNAL)
    for k, v in (("location", "../../etc/passwd"), ("offset", "0"), ("length", "12")):
        e = ext.external_data.add()
        e.key, e.value = k, v
    seg = tensor()
    seg.segment.begin, seg.segment.end = 0, 3
    return {
        "good.pb": good,
        "truncated.pb": good[:-4],
        "garbage.pb": b"\xff\xff\xff\xff garbage, not protobuf",
        "unknown_type.pb": tensor(data_type=99).SerializeToString(),
        "string.pb": tensor(data_type=TensorProto.STRING, raw=None,
                            string_data=[b"a", b"b", b"c"]).SerializeToString(),
        "complex64.pb": tensor(data_type=TensorProto.COMPLEX64, raw=b"\0" * 24).SerializeToString(),
        "float8.pb": tensor(data_type=17, raw=b"\0" * 3).SerializeToString(),
        "external.pb": ext.SerializeToString(),
        "segment.pb": seg.SerializeToString(),
        "raw_short.pb": tensor(dims=(2, 3)).SerializeToString(),
        "typed_short.pb": tensor(dims=(2, 3), raw=None, float_data=[1.0, 2.0]).SerializeToString(),
        "no_data.pb": tensor(dims=(2, 3), raw=None).SerializeToString(),
        "negative_dim.pb": tensor(dims=(3, -2)).SerializeToString(),
        "terabytes.pb": tensor(dims=(1000000, 1000000, 1000)).SerializeToString(),
        "overflowing_dims.pb": tensor(dims=(1 << 32, 1 << 32, 16)).SerializeToString(),
        "wrong_field.pb": tensor(raw=None, int32_data=[1, 2, 3]).SerializeToString(),
        "raw_and_typed.pb": tensor(float_data=[1.0, 2.0, 3.0]).SerializeToString(),
        "uint8_out_of_range.pb": tensor(data_type=TensorProto.UINT8, raw=None,
                                        int32_data=[1, 300, 3]).SerializeToString(),
        "bool_not_01.pb": tensor(data_type=TensorProto.BOOL, raw=b"\x00\x02\x01").SerializeToString(),
    }


# ---- directories ---------------------------------------------------------------------


def dir_cases():
    x = npy(hdr(), F32_3)
    return {
        "dir_no_tensors/readme.txt": b"no tensors here\n",
        "dir_same_name/a.npy": x,
        "dir_same_name/b.pb": tensor(name="a").SerializeToString(),
        "dir_bad_member/input_0.npy": x,
        "dir_bad_member/input_1.npy": npy(hdr(shape="(1000,)"), F32_3),
        "other/notes.txt": b"not a tensor file\n",
    }


# ---- ONNX models -----------------------------------------------------------------------


def model_bytes(nodes, inputs=None, outputs=None, inits=(), opset=13, value_info=()):
    from onnx import helper
    F = TensorProto.FLOAT
    inputs = inputs if inputs is not None else [helper.make_tensor_value_info("x", F, [3])]
    outputs = outputs if outputs is not None else [helper.make_tensor_value_info("y", F, [3])]
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits), value_info=list(value_info))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    m.producer_name = "make_badinput.py"
    return m.SerializeToString()


def model_cases():
    from onnx import helper
    F = TensorProto.FLOAT
    relu = helper.make_node("Relu", ["x"], ["y"], name="act")
    good = model_bytes([relu])

    def ext(location, offset=0, length=12):
        t = tensor(name="w", dims=(3,), raw=None)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
            if v != "None":
                e = t.external_data.add()
                e.key, e.value = k, v
        return model_bytes([helper.make_node("Add", ["x", "w"], ["y"], name="add")], inits=[t])

    return {
        "good.onnx": good,
        "truncated.onnx": good[: len(good) // 2],
        "not_protobuf.onnx": b"this is not an ONNX model\n",
        "empty.onnx": b"",
        "cycle.onnx": model_bytes([
            helper.make_node("Add", ["x", "b"], ["a"], name="first"),
            helper.make_node("Relu", ["a"], ["b"], name="second"),
            helper.make_node("Identity", ["a"], ["y"], name="out")]),
        "dangling.onnx": model_bytes([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")]),
        "duplicate_output.onnx": model_bytes([
            helper.make_node("Relu", ["x"], ["y"], name="one"),
            helper.make_node("Neg", ["x"], ["y"], name="two")]),
        "short_initializer.onnx": model_bytes(
            [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
            inits=[tensor(name="w", dims=(3,), raw=F32_3[:8])]),
        "terabyte_initializer.onnx": model_bytes(
            [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
            inits=[tensor(name="w", dims=(1 << 38,), raw=F32_3)]),
        "negative_dim.onnx": model_bytes(
            [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
            inits=[tensor(name="w", dims=(-3,), raw=F32_3)]),
        "wrong_attribute_type.onnx": model_bytes([helper.make_node(
            "LeakyRelu", ["x"], ["y"], name="leaky", alpha="steep")]),
        "old_opset.onnx": model_bytes([relu], opset=5),
        "unsupported_ops.onnx": model_bytes([
            helper.make_node("Frobnicate", ["x"], ["a"], name="f", domain="ai.example"),
            helper.make_node("Wibble", ["a"], ["y"], name="w", domain="ai.example")]),
        "string_initializer.onnx": model_bytes(
            [helper.make_node("Add", ["x", "s"], ["y"], name="add")],
            inits=[helper.make_tensor("s", TensorProto.STRING, [1], [b"hi"])]),
        "ext_traversal.onnx": ext("../../secret.bin"),
        "ext_absolute.onnx": ext("/etc/passwd"),
        "ext_past_eof.onnx": ext("weights.bin", offset=8, length=12),
        "weights.bin": F32_3,
        # A data file cut short (no length given: the rest of the file is the tensor's).
        "ext_truncated.onnx": ext("short.bin", length=None),
        "short.bin": F32_3[:8],
        "no_inputs_shape.onnx": model_bytes(
            [relu], inputs=[helper.make_tensor_value_info("x", F, None)]),
        "wrong_shape_x.npy": npy(hdr(shape="(4,)"), F32_3 + F32_3[:4]),
        "plan_other_model.json": b'{"schema_version": 1, "precision": "float16", '
                                 b'"fp32_nodes": ["/attn/Softmax"]}\n',
        "plan_malformed.json": b'{"schema_version": 1, "fp32_nodes": [\n',
        "plan_bad_scaled.json": b'{"schema_version": 1, "precision": "float16", '
                                b'"fp32_nodes": [], "scaled": [{"value": "x", "k": 0}]}\n',
        **part_cases(),
    }


def part(sha="aa", min_cosine=0.999, schema=4):
    """The identity of a part of a sharded check (docs/scale.md), nothing else: merge
    compares identities before it reads the states."""
    import json
    options = {"precision": "float16", "min_cosine": min_cosine}
    identity = {"model": {"path": "good.onnx", "sha256": sha}, "data": [],
                "reference_model": None, "reference_data": [], "sets": 2,
                "input_options": {"input": [], "shape": [], "seed": 0, "max_sets": 0,
                                  "sample_sets": 0},
                "options": [options]}
    return (json.dumps({"schema_version": schema, "kind": "fpguard check part",
                        "identity": identity}) + "\n").encode()


def part_cases():
    return {"part_a.json": part(), "part_other_model.json": part(sha="bb"),
            "part_other_options.json": part(min_cosine=0.99), "part_schema3.json": part(schema=3)}


def files():
    out = {}
    for sub, cases in (("npy", npy_cases()), ("npz", npz_cases()), ("pb", pb_cases()),
                       ("onnx", model_cases()), (".", dir_cases())):
        for name, data in cases.items():
            out[os.path.normpath(os.path.join(sub, name))] = data
    return out


# Seeds of the fuzz regression folders (tests/regressions/<harness>/, replayed through each
# harness by ctest regression.<harness> and by `make fuzz`): inputs of this suite that
# reach the parser's accepting path and its guards (sizes, bombs, cycles, traversal).
REGRESSIONS = os.path.join(HERE, "..", "regressions")
REGRESSION_SEEDS = {
    "npy": ["good.npy", "big_endian.npy", "fortran.npy", "header_past_eof.npy",
            "huge_header_len.npy", "terabytes.npy", "overflowing_dims.npy", "truncated_data.npy"],
    "npz": ["good.npz", "corrupt_crc.npz", "duplicate_entry.npz", "bomb_zip64.npz",
            "bomb_lying_size.npz", "bomb_ratio.npz", "truncated.npz"],
    "pb": ["good.pb", "string.pb", "external.pb", "segment.pb", "raw_short.pb", "terabytes.pb",
           "overflowing_dims.pb", "uint8_out_of_range.pb"],
    "onnx": ["good.onnx", "cycle.onnx", "dangling.onnx", "truncated.onnx",
             "terabyte_initializer.onnx", "ext_traversal.onnx", "wrong_attribute_type.onnx",
             "unsupported_ops.onnx", "plan_other_model.json", "plan_malformed.json",
             "plan_bad_scaled.json"],
}
HARNESS = {"npy": "npy", "npz": "npz", "pb": "tensor_pb", "onnx": "model"}
# The option strings the command line parses (option_values harness).
OPTION_VALUE_SEEDS = {
    "rounding-nearest-even": b"nearest-even", "rounding-misspelled": b"nearest_even",
    "iinfo-int4": b"int4", "byte-size-64M": b"64M", "byte-size-zero": b"0",
    "byte-size-exabytes": b"16E", "byte-size-overflows": b"17179869184G",
    "byte-size-max-uint64": b"18446744073709551615",
}


def regression_files():
    """{path under tests/regressions: bytes}: the seeds above, named badinput-<file>."""
    all_files = files()
    out = {}
    for sub, names in REGRESSION_SEEDS.items():
        for name in names:
            harness = "plan_json" if name.endswith(".json") else HARNESS[sub]
            out[f"{harness}/badinput-{name}"] = all_files[f"{sub}/{name}"]
    for name, data in OPTION_VALUE_SEEDS.items():
        out[f"option_values/{name}"] = data
    return out


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] not in ([], ["--check"]):
        sys.exit(__doc__)
    bad = []
    outputs = [(OUT, rel, data) for rel, data in files().items()]
    outputs += [(REGRESSIONS, rel, data) for rel, data in regression_files().items()]
    for root, rel, data in sorted(outputs):
        path = os.path.join(root, rel)
        if check:
            try:
                with open(path, "rb") as f:
                    if f.read() != data:
                        bad.append(rel)
            except FileNotFoundError:
                bad.append(rel)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    # A symlink to an input, for "the output is the input" through a link.
    link = os.path.join(OUT, "npy", "link_to_good.npy")
    if check:
        if os.readlink(link) != "good.npy":
            bad.append("npy/link_to_good.npy")
    else:
        if os.path.lexists(link):
            os.remove(link)
        os.symlink("good.npy", link)
    if bad:
        sys.exit("make_badinput.py --check: differs from the generator: " + ", ".join(bad))
    print(f"make_badinput.py: {len(outputs) + 1} files {'match' if check else 'written'}")


if __name__ == "__main__":
    main()
