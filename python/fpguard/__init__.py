"""fpguard from Python: low-precision formats, rounding, tensor statistics, safe
elementwise operations and loss scaling (docs/python.md).

The work is done by the C++ library (fpguard._fpguard); this layer only lets torch
tensors in and out. torch is never imported by fpguard: a tensor or dtype given to it
comes from a torch the caller has imported.
"""
from __future__ import annotations

import sys as _sys
from typing import Any


from . import _fpguard
from ._fpguard import (Error, FormatStats, Stats, __version__, finfo, format_names, formats,
                       iinfo, integer_types)

__all__ = [
    "Error",
    "FormatStats",
    "LossScaler",
    "Stats",
    "__version__",
    "decode",
    "encode",
    "finfo",
    "format_names",
    "formats",
    "iinfo",
    "integer_types",
    "round",
    "safe_divide",
    "safe_rsqrt",
    "stats",
]


def _torch_tensor(x):
    torch = _sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _as_numpy(x, name, func, accepts):
    """A torch tensor's NumPy view (no copy); anything else as it is."""
    if not _torch_tensor(x):
        return x
    if x.device.type != "cpu":
        raise Error(f"{name}: a {x.device.type} tensor; {func} takes CPU tensors (use .cpu())")
    try:
        return x.detach().numpy()
    except (TypeError, RuntimeError):
        dtype = str(x.dtype).replace("torch.", "")
        raise Error(f"{name}: dtype {dtype} is not supported by {func} ({accepts})") from None


def _like(result, x):
    """`result` as a torch tensor sharing its memory when the input `x` was one."""
    return _sys.modules["torch"].from_numpy(result) if _torch_tensor(x) else result


_FLOATS = "float32 or float64 only"


def round(a: Any, fmt: Any, rounding: str = "nearest-even", saturate: bool = False,
          flush_subnormals: bool = False, seed: int = 0, out: Any = None) -> Any:
    """`a` (float32/float64 NumPy array or CPU torch tensor) rounded to the format `fmt`,
    held in a's dtype. Writes into `out` when given (out=a rounds in place) and returns it.

    rounding: nearest-even, toward-zero, up, down or stochastic (reproducible by `seed`).
    saturate: finite overflow becomes +-max instead of inf/NaN.
    flush_subnormals: results below the smallest normal become zero.
    """
    a_np = _as_numpy(a, "a", "round", _FLOATS)
    out_np = None if out is None else _as_numpy(out, "out", "round", _FLOATS)
    r = _fpguard.round(a_np, fmt, rounding, saturate, flush_subnormals, seed, out_np)
    return out if out is not None else _like(r, a)


def encode(a: Any, fmt: Any, rounding: str = "nearest-even", saturate: bool = False,
           flush_subnormals: bool = False, seed: int = 0) -> Any:
    """The bit patterns of round(a, fmt, ...) in the narrowest unsigned NumPy type that
    holds them (uint8 up to 8 bits, uint16, uint32, uint64). For a torch tensor, a tensor
    of uint8 or of the signed type of that width (int16, int32, int64: torch's
    x.half().view(torch.int16) convention), holding the same bits."""
    a_np = _as_numpy(a, "a", "encode", _FLOATS)
    r = _fpguard.encode(a_np, fmt, rounding, saturate, flush_subnormals, seed)
    if _torch_tensor(a) and r.dtype.itemsize > 1:
        r = r.view(f"int{8 * r.dtype.itemsize}")
    return _like(r, a)


def decode(codes: Any, fmt: Any) -> Any:
    """The float64 values of the bit patterns `codes` (any integer dtype at least as wide
    as the format; signed types are read as bit patterns, as x.view(torch.int16) gives)."""
    c_np = _as_numpy(codes, "codes", "decode", "integer bit patterns")
    return _like(_fpguard.decode(c_np, fmt), codes)


# `fpguard inspect`'s default --formats.
INSPECT_FORMATS = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")


def stats(a: Any, formats: Any = INSPECT_FORMATS, margin: float = 0.5, name: str = "tensor",
          threads: int = 0) -> Stats:
    """Statistics of `a` (a NumPy array or CPU torch tensor of any float, integer or bool
    dtype) and how it fares in each of `formats`: the fields of `fpguard inspect --json`
    for one tensor, as attributes and as .to_dict() (docs/inspect.md).

    margin: the scales put absmax at or under margin * the format's max (0 < margin <= 1).
    name: the "name" field. threads: 0 for all cores.
    """
    dtype_name = None
    if _torch_tensor(a) and a.dtype == _sys.modules["torch"].bfloat16 and a.device.type == "cpu":
        a, dtype_name = a.detach().view(_sys.modules["torch"].int16), "bfloat16"
    a_np = _as_numpy(a, "a", "stats", "float, integer or bool arrays only")
    return _fpguard.stats(a_np, formats, margin, name, threads, dtype_name)


def safe_divide(a: Any, b: Any, eps_scale: float = 1.0, fmt: Any = None, out: Any = None) -> Any:
    """a / b with the denominator kept at least eps = eps_scale * tiny away from zero, its
    sign kept (+0 -> +eps, -0 -> -eps); tiny is the smallest normal of `fmt`, or of a's
    dtype when fmt is None. a and b: float32/float64 arrays or CPU tensors of one dtype and
    shape (no broadcasting). Writes into `out` when given (out may be a or b)."""
    a_np = _as_numpy(a, "a", "safe_divide", _FLOATS)
    b_np = _as_numpy(b, "b", "safe_divide", _FLOATS)
    out_np = None if out is None else _as_numpy(out, "out", "safe_divide", _FLOATS)
    r = _fpguard.safe_divide(a_np, b_np, eps_scale, fmt, out_np)
    return out if out is not None else _like(r, a)


def safe_rsqrt(x: Any, eps_scale: float = 1.0, fmt: Any = None, out: Any = None) -> Any:
    """1 / sqrt(max(x, eps)), eps = eps_scale * tiny (of `fmt`, or of x's dtype): negative
    x gives NaN, -0 counts as 0, +inf gives 0. Writes into `out` when given (out=x in
    place)."""
    x_np = _as_numpy(x, "x", "safe_rsqrt", _FLOATS)
    out_np = None if out is None else _as_numpy(out, "out", "safe_rsqrt", _FLOATS)
    r = _fpguard.safe_rsqrt(x_np, eps_scale, fmt, out_np)
    return out if out is not None else _like(r, x)


class LossScaler(_fpguard.LossScaler):
    """Dynamic loss scaling, step for step and bit for bit what torch.cuda.amp.GradScaler
    does (docs/python.md): LossScaler(init_scale=65536.0, growth_factor=2.0,
    backoff_factor=0.5, growth_interval=2000, enabled=True)."""

    def unscale_(self, grads: Any) -> bool:
        """Multiplies the gradients (an array or tensor, or a list of them; float32 or
        float64, C-contiguous) in place by 1/scale and returns whether any was inf or NaN."""
        if isinstance(grads, (list, tuple)):
            g = [_as_numpy(t, f"grads[{i}]", "unscale_", _FLOATS) for i, t in enumerate(grads)]
        else:
            g = _as_numpy(grads, "grads", "unscale_", _FLOATS)
        return super().unscale_(g)
