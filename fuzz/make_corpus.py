#!/usr/bin/python3
"""Seed corpora for the libFuzzer harnesses (fuzz/*_fuzz.cpp), written by NumPy and onnx
themselves (Debian's python3-numpy and python3-onnx: run with /usr/bin/python3).

    make_corpus.py OUTDIR
        Writes OUTDIR/<harness>/<seed> for npy, npz, tensor_pb, format_name and
        option_values: small valid files of every dtype, every header version and layout
        NumPy writes, typed and raw TensorProtos, every format name and a few custom
        eXmY spellings followed by interesting float32 values. The output is generated,
        not committed (fuzz/run writes it under build-fuzz/corpus/); the fuzzer adds what
        it finds there.
"""
import io
import json
import os
import sys
import zipfile

import numpy as np
from onnx import TensorProto, helper, mapping, numpy_helper

DTYPES = [np.float64, np.float32, np.float16, np.int8, np.int16, np.int32, np.int64,
          np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]
SHAPES = [(), (0,), (3,), (2, 3), (1, 0, 2), (2, 1, 2, 1)]

FORMAT_NAMES = [
    "float64", "fp64", "double", "float32", "fp32", "float", "tf32", "float16", "fp16",
    "half", "bfloat16", "bf16", "float8_e4m3fn", "fp8_e4m3fn", "e4m3", "float8_e4m3fnuz",
    "fp8_e4m3fnuz", "float8_e5m2", "fp8_e5m2", "e5m2", "float8_e5m2fnuz", "fp8_e5m2fnuz",
    "float6_e2m3fn", "fp6_e2m3", "float6_e3m2fn", "fp6_e3m2", "float4_e2m1fn", "fp4_e2m1",
    "fp4", "float8_e8m0fnu", "e8m0",
    # custom spellings, valid and not
    "e5m7", "e4m3fn", "e3m2fnuz", "e11m52", "e8m0fn", "e2m0fn", "e6m9fnuz", "e11m0fn",
    "e12m3", "e5m0", "e5m53", "e1m2", "e4m3fu", "E5M10", "e05m02",
]
OPTION_VALUES = [
    "nearest-even", "toward-zero", "up", "down", "stochastic", "nearest_even",
    "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "int4", "uint4",
    "1", "512", "4K", "64M", "2G", "1T", "1KiB", "3gb", "0", "18446744073709551615",
    "16E", "17179869184G",
]


def values(rng):
    f = np.finfo(np.float32)
    special = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, f.max, -f.max, f.tiny,
               f.tiny / 2, 2.0**-149, 65504.0, 65520.0, 448.0, 464.0, 57344.0, 240.0, 6.0,
               7.5, 28.0, 1.5, 2.5, 1 + 2.0**-11, 1 + 3 * 2.0**-11, 2.0**-24, 2.0**127,
               2.0**-127, 3.0e-8, 1e-45]
    x = np.array(special + list(rng.standard_normal(16) * 10.0 ** rng.integers(-8, 8, 16)),
                 dtype=np.float32)
    return x


def npy_bytes(a, version=None):
    b = io.BytesIO()
    if version is None:
        np.save(b, a, allow_pickle=False)
    else:
        np.lib.format.write_array(b, a, version=version, allow_pickle=False)
    return b.getvalue()


def arrays(rng):
    out = {}
    for dt in DTYPES:
        for shape in SHAPES:
            n = int(np.prod(shape))
            if dt is np.bool_:
                a = rng.integers(0, 2, n).astype(np.bool_)
            elif np.issubdtype(dt, np.floating):
                a = (rng.standard_normal(n) * 100).astype(dt)
            else:
                a = rng.integers(0, 100, n).astype(dt)
            out[f"{np.dtype(dt).name}_{'x'.join(map(str, shape)) or 'scalar'}"] = a.reshape(shape)
    return out


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    rng = np.random.default_rng(20240611)
    arrs = arrays(rng)

    # .npy: every dtype and shape, big-endian, header versions 2.0 and 3.0, Fortran order.
    for k, a in arrs.items():
        if a.ndim <= 2:
            write(f"{out}/npy/{k}.npy", npy_bytes(a))
    for dt in (">f8", ">f4", ">f2", ">i4", ">u8"):
        write(f"{out}/npy/be_{dt[1:]}.npy", npy_bytes(np.arange(5).astype(dt)))
    write(f"{out}/npy/v2.npy", npy_bytes(np.arange(6, dtype=np.float32).reshape(2, 3), (2, 0)))
    write(f"{out}/npy/v3.npy", npy_bytes(np.arange(4, dtype=np.int16), (3, 0)))
    write(f"{out}/npy/fortran.npy", npy_bytes(np.asfortranarray(np.ones((2, 3), np.float32))))
    write(f"{out}/npy/values.npy", npy_bytes(values(rng)))

    # .npz: stored and deflated, one or several entries, empty.
    small = [a for k, a in arrs.items() if k.endswith("_2x3")]
    for compressed in (False, True):
        save = np.savez_compressed if compressed else np.savez
        tag = "deflated" if compressed else "stored"
        b = io.BytesIO()
        save(b, *small[:4])
        write(f"{out}/npz/{tag}_four.npz", b.getvalue())
        b = io.BytesIO()
        save(b, x=values(rng))
        write(f"{out}/npz/{tag}_values.npz", b.getvalue())
    b = io.BytesIO()
    np.savez(b)
    write(f"{out}/npz/empty.npz", b.getvalue())
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        z.writestr("dir/", b"")
        z.writestr("a.npy", npy_bytes(np.arange(3, dtype=np.uint8)))
    write(f"{out}/npz/with_dir.npz", b.getvalue())

    # TensorProto: raw_data (numpy_helper) and typed fields (helper.make_tensor) of every
    # type, bfloat16, external data, a STRING tensor.
    onnx_types = {np.dtype(d): mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(d)] for d in DTYPES}
    for k, a in arrs.items():
        if a.ndim > 2:
            continue
        write(f"{out}/tensor_pb/raw_{k}.pb", numpy_helper.from_array(a, k).SerializeToString())
        t = helper.make_tensor(k, onnx_types[a.dtype], a.shape, a.flatten().tolist()
                               if a.dtype != np.float16 else a.view(np.uint16).flatten().tolist(),
                               raw=False)
        write(f"{out}/tensor_pb/typed_{k}.pb", t.SerializeToString())
    t = helper.make_tensor("bf", TensorProto.BFLOAT16, [2], [0x3F80, 0xC020], raw=False)
    write(f"{out}/tensor_pb/bf16_typed.pb", t.SerializeToString())
    t = helper.make_tensor("bf", TensorProto.BFLOAT16, [2], b"\x80\x3f\x20\xc0", raw=True)
    write(f"{out}/tensor_pb/bf16_raw.pb", t.SerializeToString())
    t = numpy_helper.from_array(np.ones(4, np.float32), "ext")
    t.data_location = TensorProto.EXTERNAL
    t.ClearField("raw_data")
    e = t.external_data.add()
    e.key, e.value = "location", "weights.bin"
    write(f"{out}/tensor_pb/external.pb", t.SerializeToString())
    t = helper.make_tensor("s", TensorProto.STRING, [2], [b"ab", b"c"])
    write(f"{out}/tensor_pb/string.pb", t.SerializeToString())

    # Format names, alone and followed by '\n', an options byte and float32 values.
    x = values(rng).tobytes()
    for i, name in enumerate(FORMAT_NAMES):
        write(f"{out}/format_name/{i:02d}_{name}", name.encode())
        for opt in (0x00, 0x09, 0x11, 0x04):
            write(f"{out}/format_name/{i:02d}_{name}_{opt:02x}",
                  name.encode() + b"\n" + bytes([opt]) + x)
    for i, v in enumerate(OPTION_VALUES):
        write(f"{out}/option_values/{i:02d}", v.encode())
    # Models: small graphs of the kinds check and plan meet (norms, attention, control
    # flow, external data, every initializer dtype), and the shipped examples.
    F = TensorProto.FLOAT
    x_in = helper.make_tensor_value_info("x", F, [2, 4])
    y_out = helper.make_tensor_value_info("y", F, [2, 4])
    w = numpy_helper.from_array(rng.normal(0, 1, (4, 4)).astype(np.float32), "w")
    two = numpy_helper.from_array(np.array(2, np.float32), "two")
    graphs = {
        "mlp": ([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                 helper.make_node("Relu", ["h"], ["y"], name="act")], [w]),
        "rmsnorm": ([helper.make_node("Pow", ["x", "two"], ["p"], name="sq"),
                     helper.make_node("ReduceMean", ["p"], ["m"], name="mean", axes=[1]),
                     helper.make_node("Sqrt", ["m"], ["r"], name="root"),
                     helper.make_node("Div", ["x", "r"], ["y"], name="norm")], [two]),
        "softmax": ([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=-1)], []),
        "cast": ([helper.make_node("Cast", ["x"], ["h"], name="c16", to=TensorProto.FLOAT16),
                  helper.make_node("Cast", ["h"], ["y"], name="c32", to=F)], []),
    }
    for name, (nodes, inits) in graphs.items():
        g = helper.make_graph(nodes, name, [x_in], [y_out], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        write(f"{out}/model/{name}.onnx", m.SerializeToString())
    then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", F, [2, 4])])
    else_g = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", F, [2, 4])])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then_g,
                                            else_branch=else_g)], "if",
                          [x_in, helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                          [y_out])
    write(f"{out}/model/if.onnx",
          helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    ext = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    ext.data_location = TensorProto.EXTERNAL
    ext.ClearField("raw_data")
    for k, v in (("location", "w.bin"), ("offset", "0"), ("length", "64")):
        e = ext.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "ext", [x_in], [y_out],
                          [ext])
    write(f"{out}/model/external.onnx",
          helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")
    for name in ("superres", "clean_cnn"):
        with open(os.path.join(examples, name, "model.onnx"), "rb") as f:
            write(f"{out}/model/example_{name}.onnx", f.read())

    # plan.json files as fpguard plan writes them, and near misses.
    plans = [
        {"schema_version": 1, "model": "m.onnx", "precision": "float16",
         "tolerance": {"min_cosine": 0.999, "atol": None, "rtol": None},
         "fp32_nodes": ["/Pow", "/ReduceMean"], "scaled": [], "casts": 4, "passes": 4},
        {"schema_version": 1, "precision": "bfloat16", "fp32_nodes": [],
         "scaled": [{"node": "/Pow", "value": "/relu/Relu_output_0", "k": 2, "scale": 0.25}]},
        {"schema_version": 2, "precision": "float16", "fp32_nodes": []},
        {"schema_version": 1, "precision": "float16", "fp32_nodes": [1, 2]},
    ]
    for i, p in enumerate(plans):
        write(f"{out}/plan_json/{i}.json", json.dumps(p).encode())

    # JSON as a part holds it (numbers of every kind, "inf"/"nan" strings, nested arrays
    # and objects), and what only one of the two parsers behind the tape reads.
    docs = [json.dumps(p) for p in plans] + [
        '{"schema_version":4,"sets":[3,4],"states":[{"absmax":{"/a":1e308,"/b":5e-324},'
        '"seen":["/a"],"cmp":[1,0,0,2,0,3,0.5,1e-7,"inf",null,-0.0,"nan"]}],"threads":2}',
        '{"k":1,"k":{"k":[1,2]},"k":null}', '[18446744073709551615,18446744073709551616,'
        '-9223372036854775808,-9223372036854775809,-0,0e5,1e-400]',
        '"\\u00e9\\ud83d\\ude00\\n"', '\ufeff[1]', '[' * 1100 + ']' * 1100, '[1,]', '{"a" 1}']
    for i, d in enumerate(docs):
        write(f"{out}/json_tape/{i}.json", d.encode())

    # Input options: one per line ("shape NAME=..." for --shape).
    specs = ["x=uniform:-1:1\nn=uniform:0:9\nshape n=5",
             "x=normal:0:1\nshape n=0\nseed 3",
             "x=uniform:5:1",
             "n=normal:0:2\nshape n=3,4",
             "x=missing.npy",
             "shape n=-1",
             "x=uniform:1e308:inf"]
    for i, spec in enumerate(specs):
        write(f"{out}/input_spec/{i}", spec.encode())
    print(f"make_corpus.py: seeds written under {out}")


if __name__ == "__main__":
    main()
