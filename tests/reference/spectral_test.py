"""DFT (opsets 17 and 20) and STFT against NumPy's FFT (numpy.fft in float64): real and
complex inputs, every signal axis (negative ones too), dft_length that pads and that
truncates, prime and composite lengths, inverse, onesided, windows, frame steps; and the
errors for inputs the ops refuse."""

import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

import fpgref


def model(op, inputs, init, attrs, opset, x_shape):
    """One-node model: graph input 'x', the other inputs as initializers."""
    nodes = [helper.make_node(op, inputs, ["y"], **attrs)]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def int_init(name, v):
    return helper.make_tensor(name, TensorProto.INT64, [], [int(v)])


def run(c, fpg, tmp, case, m, x):
    path = os.path.join(tmp, case + ".onnx")
    onnx.save(m, path)
    xp = os.path.join(tmp, case + "_x.npy")
    np.save(xp, x)
    out = os.path.join(tmp, case + "_out")
    r = fpgref.run(fpg, "run", path, "--input", "x=" + xp, "--outputs", out)
    if not c.check(r.returncode == 0, f"{case}: exit code", r.stderr):
        return None
    return np.load(os.path.join(out, "y.npy")).astype(np.float64)


def as_complex(x):
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0].astype(np.complex128)


def close(c, case, got, want):
    want = np.stack([want.real, want.imag], axis=-1)
    if not c.check(got is not None and got.shape == want.shape, f"{case}: shape",
                   f"{None if got is None else got.shape} vs {want.shape}"):
        return
    # float32 input and output: a few float32 ulps of the spectrum's scale.
    tol = 1e-5 * max(1.0, np.abs(want).max())
    err = np.abs(got - want).max()
    c.check(err <= tol, f"{case}: values", f"max error {err:.3g} > {tol:.3g}")


def main():
    args = fpgref.parse_args(__doc__)
    c = fpgref.Checker("spectral_test")
    rng = np.random.default_rng(17)
    with tempfile.TemporaryDirectory() as tmp:
        n = 0
        for shape in ([2, 12, 3, 1], [2, 7, 5, 2], [1, 16, 2]):
            x = rng.standard_normal(shape).astype(np.float32)
            xc = as_complex(x.astype(np.float64))
            rank = len(shape)
            for axis in range(-rank, rank - 1):
                if axis == -1:
                    continue
                ax = axis % rank
                size = shape[ax]
                for length in (None, size + 3, max(1, size - 2), 11):
                    for inverse in (0, 1):
                        for onesided in (0, 1):
                            if onesided and (inverse or shape[-1] == 2):
                                continue  # onesided: forward transforms of real signals
                            nlen = size if length is None else length
                            f = np.fft.ifft if inverse else np.fft.fft
                            want = f(xc, n=nlen, axis=ax)
                            if onesided:
                                want = np.take(want, range(nlen // 2 + 1), axis=ax)
                            for opset in (17, 20):
                                if opset == 17 and axis < 0:
                                    continue
                                inputs, init = ["x"], []
                                inputs.append("len" if length is not None else "")
                                if length is not None:
                                    init.append(int_init("len", length))
                                attrs = {"inverse": inverse, "onesided": onesided}
                                if opset == 20:
                                    inputs.append("axis")
                                    init.append(int_init("axis", axis))
                                else:
                                    attrs["axis"] = axis
                                case = (f"DFT-{opset} {shape} axis {axis} length {length} "
                                        f"inverse {inverse} onesided {onesided}")
                                n += 1
                                got = run(c, args.fpguard, tmp, f"dft{n}",
                                          model("DFT", inputs, init, attrs, opset, shape), x)
                                close(c, case, got, want)
        # DFT-20 with the axis input omitted: the last signal axis (-2).
        x = rng.standard_normal([3, 5, 6, 1]).astype(np.float32)
        got = run(c, args.fpguard, tmp, "dft_default_axis",
                  model("DFT", ["x"], [], {}, 20, [3, 5, 6, 1]), x)
        close(c, "DFT-20 default axis", got, np.fft.fft(as_complex(x.astype(np.float64)),
                                                        axis=2))

        # STFT: frames of frame_length every frame_step, times the window, transformed.
        for sig_len, step, fl, window, onesided, cplx in (
                (64, 8, 16, None, 1, False), (64, 5, 16, "hann", 1, False),
                (50, 7, 9, "ramp", 0, False), (40, 3, 10, "hann", 0, True),
                (33, 33, 33, None, 1, False)):
            x = rng.standard_normal([2, sig_len, 2 if cplx else 1]).astype(np.float32)
            xc = as_complex(x.astype(np.float64))
            w = None
            inputs, init = ["x", "step"], [int_init("step", step)]
            if window is None:
                inputs += ["", "fl"]
                init.append(int_init("fl", fl))
            else:
                k = np.arange(fl)
                w = (0.5 - 0.5 * np.cos(2 * np.pi * k / fl) if window == "hann"
                     else (k + 1) / fl).astype(np.float32)
                inputs.append("w")
                init.append(helper.make_tensor("w", TensorProto.FLOAT, [fl], w.tolist()))
            frames = (sig_len - fl) // step + 1
            idx = np.arange(frames)[:, None] * step + np.arange(fl)[None, :]
            seg = xc[:, idx] * (1.0 if w is None else w.astype(np.float64))
            want = np.fft.fft(seg, axis=-1)
            if onesided:
                want = want[..., :fl // 2 + 1]
            case = f"STFT len {sig_len} step {step} frame {fl} window {window} onesided {onesided}"
            got = run(c, args.fpguard, tmp, f"stft_{sig_len}_{step}",
                      model("STFT", inputs, init, {"onesided": onesided}, 17,
                            list(x.shape)), x)
            close(c, case, got, want)

        # Refused inputs: one line naming the node, exit 2.
        bad = (
            ("DFT axis on the complex dimension", model("DFT", ["x", "", "axis"],
                                                        [int_init("axis", -1)], {}, 20,
                                                        [2, 8, 1]), [2, 8, 1], "axis -1"),
            ("DFT rank-1 input", model("DFT", ["x"], [], {}, 17, [8]), [8], "rank >= 2"),
            ("DFT zero dft_length", model("DFT", ["x", "len"], [int_init("len", 0)], {}, 17,
                                          [2, 8, 1]), [2, 8, 1], "dft_length must be positive"),
            ("STFT onesided complex", model("STFT", ["x", "step", "", "fl"],
                                            [int_init("step", 2), int_init("fl", 4)], {}, 17,
                                            [1, 16, 2]), [1, 16, 2], "needs a real signal"),
            ("STFT frame longer than signal", model("STFT", ["x", "step", "", "fl"],
                                                    [int_init("step", 2), int_init("fl", 32)],
                                                    {}, 17, [1, 16, 1]), [1, 16, 1],
             "longer than the signal"),
        )
        for i, (case, m, shape, msg) in enumerate(bad):
            path = os.path.join(tmp, f"bad{i}.onnx")
            onnx.save(m, path)
            xp = os.path.join(tmp, f"bad{i}.npy")
            np.save(xp, np.ones(shape, np.float32))
            r = fpgref.run(args.fpguard, "run", path, "--input", "x=" + xp, "--outputs",
                           os.path.join(tmp, f"bad{i}_out"))
            c.equal(r.returncode, 2, f"{case}: exit code")
            c.check(msg in r.stderr and r.stderr.count("\n") == 1, f"{case}: message",
                    r.stderr)
    c.finish()


if __name__ == "__main__":
    main()
