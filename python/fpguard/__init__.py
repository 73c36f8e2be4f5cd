"""fpguard from Python: low-precision formats and rounding (docs/python.md).

The work is done by the C++ library (fpguard._fpguard); this layer only lets torch
tensors in and out. torch is never imported by fpguard: a tensor or dtype given to it
comes from a torch the caller has imported.
"""
from __future__ import annotations

import sys as _sys
from typing import Any


from . import _fpguard
from ._fpguard import Error, __version__, finfo, format_names, formats, iinfo, integer_types

__all__ = [
    "Error",
    "__version__",
    "decode",
    "encode",
    "finfo",
    "format_names",
    "formats",
    "iinfo",
    "integer_types",
    "round",
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
