#!/usr/bin/python3
"""Fixtures for tests/io_test.cpp, written by NumPy and onnx themselves (Debian's
python3-numpy and python3-onnx, run as /usr/bin/python3), never by fpguard.

    make_io_fixtures.py OUTDIR
        Writes into OUTDIR:
          arrays/<key>.npy      every test array, by np.save (the expected values)
          arrays/bf16_bits.npy  the bfloat16 test values as their uint16 bit patterns
          savez.npz, savez_compressed.npz and <name>.order.txt (np.load's key order)
          pb_raw/<key>.pb       numpy_helper.from_array (raw_data), plus bf16.pb
          pb_typed/<key>.pb     helper.make_tensor(raw=False): float_data, int32_data, ...
          testadd/<name>.npy    numpy_helper.to_array of ONNX's test_add test_data_set_0
          bomb.npz, trailing.npz, dup.npz, badmagic.npz, short.npz, other.npz:
                                malformed archives

    make_io_fixtures.py --read OUTDIR FILE...
        Reads .npz and .pb files that fpguard wrote, with np.load and
        numpy_helper.to_array, and saves each array as OUTDIR/<stem>.<key>.npy (for .pb:
        OUTDIR/<stem>.npy and its TensorProto name in OUTDIR/<stem>.name.txt).
"""
import io
import os
import sys
import warnings
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TEST_ADD = "/usr/share/libonnx-testdata/data/node/test_add/test_data_set_0"

ONNX_TYPES = {
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.int16): TensorProto.INT16,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.uint16): TensorProto.UINT16,
    np.dtype(np.uint32): TensorProto.UINT32,
    np.dtype(np.uint64): TensorProto.UINT64,
    np.dtype(np.bool_): TensorProto.BOOL,
}

# Exactly representable in bfloat16, so every float->bfloat16 conversion agrees.
BF16_VALUES = [1.0, -2.5, 0.0078125, 3.3895313892515355e38, -0.0, float("inf"), 2.0**-133]


def arrays():
    i = np.iinfo
    return {
        "f64": np.array([0.0, -0.0, 1.5, -2.25e300, np.inf, -np.inf, np.nan, 5e-324]).reshape(2, 4),
        "f32": np.array([1.0, -3.5, 3.4028235e38, 1e-45, np.inf, np.nan], np.float32).reshape(3, 2),
        "f16": np.array([1.0, -2.5, 65504, 6e-8, -np.inf, np.nan], np.float16),
        "i8": np.array([i(np.int8).min, -1, 0, i(np.int8).max], np.int8),
        "i16": np.array([i(np.int16).min, i(np.int16).max, 7], np.int16),
        "i32": np.array([i(np.int32).min, i(np.int32).max, 0], np.int32),
        "i64": np.array([i(np.int64).min, i(np.int64).max, 42], np.int64).reshape(3, 1),
        "u8": np.array([0, 255, 7], np.uint8),
        "u16": np.array([0, 65535, 1], np.uint16),
        "u32": np.array([0, 2**32 - 1, 3], np.uint32),
        "u64": np.array([0, 2**64 - 1, 5], np.uint64),
        "b": np.array([[True, False, True]]),
        "scalar": np.array(2.5, np.float32),
        "empty": np.zeros((0, 3), np.float32),
    }


def bf16_bits():
    return (np.array(BF16_VALUES, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def typed_tensor(name, a):
    """A TensorProto with the values in the typed field, as make_tensor(raw=False) does."""
    # make_tensor itself puts float16 values in int32_data as their bit patterns.
    return helper.make_tensor(name, ONNX_TYPES[a.dtype], a.shape, a.flatten().tolist(), raw=False)


def npy_bytes(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def write_fixtures(out):
    for sub in ("arrays", "pb_raw", "pb_typed", "testadd"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    a = arrays()
    for k, v in a.items():
        np.save(os.path.join(out, "arrays", k + ".npy"), v)
        onnx.save_tensor(numpy_helper.from_array(v, k), os.path.join(out, "pb_raw", k + ".pb"))
        if v.size > 0 and v.ndim > 0:
            onnx.save_tensor(typed_tensor(k, v), os.path.join(out, "pb_typed", k + ".pb"))
    np.save(os.path.join(out, "arrays", "bf16_bits.npy"), bf16_bits())
    bf16 = helper.make_tensor("bf16", TensorProto.BFLOAT16, [len(BF16_VALUES)], BF16_VALUES)
    assert not bf16.HasField("raw_data") and len(bf16.int32_data) == len(BF16_VALUES)
    onnx.save_tensor(bf16, os.path.join(out, "pb_typed", "bf16.pb"))
    raw = helper.make_tensor("bf16", TensorProto.BFLOAT16, [len(BF16_VALUES)],
                             bf16_bits().tobytes(), raw=True)
    onnx.save_tensor(raw, os.path.join(out, "pb_raw", "bf16.pb"))

    for name, save in (("savez", np.savez), ("savez_compressed", np.savez_compressed)):
        path = os.path.join(out, name + ".npz")
        save(path, a["f32"], **a)  # the positional array becomes arr_0
        with np.load(path) as z:
            order = z.files
        with open(os.path.join(out, name + ".order.txt"), "w") as f:
            f.write("\n".join(order) + "\n")

    for f in sorted(os.listdir(TEST_ADD)):
        t = onnx.load_tensor(os.path.join(TEST_ADD, f))
        np.save(os.path.join(out, "testadd", t.name + ".npy"), numpy_helper.to_array(t))

    # Declares 5 GiB for an entry that holds a few bytes: the guard must refuse it from the
    # directory alone. zipfile writes a size beyond 4 GiB as a zip64 extra field.
    with zipfile.ZipFile(os.path.join(out, "bomb.npz"), "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("big.npy", npy_bytes(np.zeros(4, np.float32)))
        z.filelist[0].file_size = 5 << 30
    with zipfile.ZipFile(os.path.join(out, "trailing.npz"), "w") as z:
        z.writestr("t.npy", npy_bytes(np.ones(2, np.int16)) + b"\0\0\0\0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name"
        with zipfile.ZipFile(os.path.join(out, "dup.npz"), "w") as z:
            z.writestr("x.npy", npy_bytes(np.ones(2, np.int16)))
            z.writestr("x.npy", npy_bytes(np.zeros(2, np.int16)))
    with zipfile.ZipFile(os.path.join(out, "badmagic.npz"), "w") as z:
        z.writestr("x.npy", b"garbage" + npy_bytes(np.ones(2, np.int16)))
    with zipfile.ZipFile(os.path.join(out, "short.npz"), "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("s.npy", npy_bytes(np.ones(4, np.int16))[:-1])
    with zipfile.ZipFile(os.path.join(out, "other.npz"), "w") as z:
        z.writestr("a.npy", npy_bytes(np.ones(2, np.int16)))
        z.writestr("readme.txt", b"not an array")


def read_back(out, files):
    for f in files:
        stem = os.path.splitext(os.path.basename(f))[0]
        if f.endswith(".npz"):
            with np.load(f) as z:
                for k in z.files:
                    np.save(os.path.join(out, stem + "." + k + ".npy"), z[k])
        else:
            t = onnx.load_tensor(f)
            np.save(os.path.join(out, stem + ".npy"), numpy_helper.to_array(t))
            with open(os.path.join(out, stem + ".name.txt"), "w") as n:
                n.write(t.name)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--read":
        read_back(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 2:
        write_fixtures(sys.argv[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
