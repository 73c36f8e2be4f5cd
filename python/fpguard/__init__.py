"""fpguard from Python: low-precision formats, rounding, tensor statistics, safe
elementwise operations, loss scaling, and models: load, run, check, plan, convert
(docs/python.md).

The work is done by the C++ library (fpguard._fpguard); this layer only lets torch
tensors in and out. torch is never imported by fpguard: a tensor or dtype given to it
comes from a torch the caller has imported.
"""
from __future__ import annotations

import json as _json
import operator as _operator
import os as _os
import sys as _sys
from dataclasses import dataclass as _dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union


from . import _fpguard
from ._fpguard import (Error, FormatStats, Stats, __version__, format_names, iinfo,
                       integer_types, scaled_finfo)

__all__ = [
    "Diagnosis",
    "Error",
    "FormatStats",
    "LossScaler",
    "Model",
    "Node",
    "Plan",
    "Record",
    "Stats",
    "ValueInfo",
    "__version__",
    "accum",
    "check",
    "convert",
    "decode",
    "encode",
    "finfo",
    "format_names",
    "formats",
    "gemm_error",
    "iinfo",
    "integer_types",
    "load",
    "plan",
    "round",
    "run",
    "safe_divide",
    "safe_rsqrt",
    "scaled_finfo",
    "stats",
    "targets",
]


class finfo(_fpguard.finfo):
    __doc__ = _fpguard.finfo.__doc__ + (
        " A scaled format's name (mxfp8_e4m3, nvfp4, fp8, channel:float8_e4m3fn, block:E:S:N) "
        "gives a scaled_finfo instead (fpguard finfo mxfp8_e4m3).")

    def __new__(cls, type: Any) -> Any:
        scaled = _fpguard._scaled_finfo(type)
        return scaled if scaled is not None else super().__new__(cls)


def formats() -> List[finfo]:
    """Every named format, in the CLI's order (fpguard finfo --all), as finfo objects."""
    return [finfo(f.dtype) for f in _fpguard.formats()]


# ---- argument types ----------------------------------------------------------------------
# A value of the wrong type is a TypeError naming the argument (fpguard.Error, a ValueError,
# is for values of the right type that are wrong: an unknown name, a negative seed).

def _type_error(name: str, expected: str, value: Any) -> TypeError:
    return TypeError(f"{name}: expected {expected}, got {type(value).__name__}")


def _int(value: Any, name: str) -> int:
    if type(value) is int:  # the common case first: a call on 16 elements costs ~5 us
        return value
    if isinstance(value, bool):
        raise _type_error(name, "an integer", value)
    try:
        return _operator.index(value)
    except TypeError:
        raise _type_error(name, "an integer", value) from None


def _float(value: Any, name: str) -> float:
    if type(value) is float:
        return value
    if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
        raise _type_error(name, "a number", value)
    return float(value)


def _opt_float(value: Any, name: str) -> Optional[float]:
    return None if value is None else _float(value, name)


def _bool(value: Any, name: str) -> bool:
    if value is True or value is False:
        return value
    if type(value).__name__ not in ("bool", "bool_"):
        raise _type_error(name, "a bool", value)
    return bool(value)


def _str(value: Any, name: str) -> str:
    if type(value) is str:
        return value
    if not isinstance(value, str):
        raise _type_error(name, "a str", value)
    return value


def _strs(value: Any, name: str) -> List[str]:
    """A list of names (a single str is one name)."""
    if isinstance(value, str):
        return [value]
    try:
        items = list(value)
    except TypeError:
        raise _type_error(name, "a list of str", value) from None
    for v in items:
        if not isinstance(v, str):
            raise _type_error(name, "a list of str", v)
    return items


def _torch_tensor(x):
    torch = _sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _as_numpy(x, name, func, accepts):
    """A torch tensor's NumPy view (no copy), an object with __dlpack__ (on the CPU) as a
    read-only NumPy view of its memory (no copy); anything else as it is."""
    if type(x).__name__ == "ndarray":  # the common case first
        return x
    if not _torch_tensor(x):
        if hasattr(x, "__dlpack__") and type(x).__name__ != "ndarray":
            import numpy
            try:
                return numpy.from_dlpack(x)
            except (TypeError, RuntimeError, BufferError, ValueError) as e:
                reason = str(e).splitlines()[0] if str(e) else type(e).__name__
                raise Error(f"{name}: a {type(x).__name__} NumPy cannot read through DLPack "
                            f"({reason})") from None
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


def _axis(axis: Any) -> Optional[int]:
    return None if axis is None else _int(axis, "axis")


def _round_flags(rounding: Any, saturate: Any, flush_subnormals: Any, seed: Any) -> tuple:
    return (_str(rounding, "rounding"), _bool(saturate, "saturate"),
            _bool(flush_subnormals, "flush_subnormals"), _int(seed, "seed"))


def round(a: Any, fmt: Any, rounding: str = "nearest-even", saturate: bool = False,
          flush_subnormals: bool = False, seed: int = 0, out: Any = None,
          axis: Optional[int] = None) -> Any:
    """`a` (float32/float64 NumPy array, CPU torch tensor or object with __dlpack__)
    rounded to the format `fmt`, held in a's dtype. Writes into `out` when given (out=a
    rounds in place) and returns it.

    rounding: nearest-even, toward-zero, up, down or stochastic (reproducible by `seed`).
    saturate: finite overflow becomes +-max instead of inf/NaN.
    flush_subnormals: results below the smallest normal become zero.
    A scaled format (mxfp8_e4m3, mxfp4_e2m1, nvfp4, fp8, channel:float8_e4m3fn,
    block:E:S:N) quantizes and dequantizes with its scales: blocks run along `axis`
    (default the last; channel: formats: the channel axis, default 0), as `fpguard round
    --axis`; it rounds to nearest-even and saturates by definition.
    """
    # The checks and conversions only where needed: a call on 16 elements costs ~5 us.
    if not (type(rounding) is str and type(seed) is int and type(saturate) is bool and
            type(flush_subnormals) is bool and axis is None):
        rounding, saturate, flush_subnormals, seed = _round_flags(rounding, saturate,
                                                                  flush_subnormals, seed)
        axis = _axis(axis)
    a_np = a if type(a).__name__ == "ndarray" else _as_numpy(a, "a", "round", _FLOATS)
    out_np = out if out is None or type(out).__name__ == "ndarray" else \
        _as_numpy(out, "out", "round", _FLOATS)
    r = _fpguard.round(a_np, fmt, rounding, saturate, flush_subnormals, seed, out_np, axis)
    return out if out is not None else _like(r, a)


def encode(a: Any, fmt: Any, rounding: str = "nearest-even", saturate: bool = False,
           flush_subnormals: bool = False, seed: int = 0, axis: Optional[int] = None) -> Any:
    """The bit patterns of round(a, fmt, ...) in the narrowest unsigned NumPy type that
    holds them (uint8 up to 8 bits, uint16, uint32, uint64). For a torch tensor, a tensor
    of uint8 or of the signed type of that width (int16, int32, int64: torch's
    x.half().view(torch.int16) convention), holding the same bits.

    A scaled format gives a dict of NumPy arrays, the .npz `fpguard round --encode` writes:
    codes (a's shape), scales (their codes, or for fp8/tensor:/channel: their values) and,
    for two-level scales (nvfp4), global_scale."""
    flags = _round_flags(rounding, saturate, flush_subnormals, seed)
    a_np = _as_numpy(a, "a", "encode", _FLOATS)
    r = _fpguard.encode(a_np, fmt, *flags, _axis(axis))
    if isinstance(r, dict):
        return r
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
    return _fpguard.stats(a_np, formats, _float(margin, "margin"), _str(name, "name"),
                          _int(threads, "threads"), dtype_name)


def safe_divide(a: Any, b: Any, eps_scale: float = 1.0, fmt: Any = None, out: Any = None) -> Any:
    """a / b with the denominator kept at least eps = eps_scale * tiny away from zero, its
    sign kept (+0 -> +eps, -0 -> -eps); tiny is the smallest normal of `fmt`, or of a's
    dtype when fmt is None. a and b: float32/float64 arrays or CPU tensors of one dtype and
    shape (no broadcasting). Writes into `out` when given (out may be a or b)."""
    a_np = _as_numpy(a, "a", "safe_divide", _FLOATS)
    b_np = _as_numpy(b, "b", "safe_divide", _FLOATS)
    out_np = None if out is None else _as_numpy(out, "out", "safe_divide", _FLOATS)
    r = _fpguard.safe_divide(a_np, b_np, _float(eps_scale, "eps_scale"), fmt, out_np)
    return out if out is not None else _like(r, a)


def safe_rsqrt(x: Any, eps_scale: float = 1.0, fmt: Any = None, out: Any = None) -> Any:
    """1 / sqrt(max(x, eps)), eps = eps_scale * tiny (of `fmt`, or of x's dtype): negative
    x gives NaN, -0 counts as 0, +inf gives 0. Writes into `out` when given (out=x in
    place)."""
    x_np = _as_numpy(x, "x", "safe_rsqrt", _FLOATS)
    out_np = None if out is None else _as_numpy(out, "out", "safe_rsqrt", _FLOATS)
    r = _fpguard.safe_rsqrt(x_np, _float(eps_scale, "eps_scale"), fmt, out_np)
    return out if out is not None else _like(r, x)


class LossScaler(_fpguard.LossScaler):
    """Dynamic loss scaling, step for step and bit for bit what torch.cuda.amp.GradScaler
    does (docs/python.md): LossScaler(init_scale=65536.0, growth_factor=2.0,
    backoff_factor=0.5, growth_interval=2000, enabled=True)."""

    def __init__(self, init_scale: float = 65536.0, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        super().__init__(_float(init_scale, "init_scale"),
                         _float(growth_factor, "growth_factor"),
                         _float(backoff_factor, "backoff_factor"),
                         _int(growth_interval, "growth_interval"), _bool(enabled, "enabled"))

    def unscale_(self, grads: Any) -> bool:
        """Multiplies the gradients (an array or tensor, or a list of them; float32 or
        float64, C-contiguous) in place by 1/scale and returns whether any was inf or NaN."""
        if isinstance(grads, (list, tuple)):
            g = [_as_numpy(t, f"grads[{i}]", "unscale_", _FLOATS) for i, t in enumerate(grads)]
        else:
            g = _as_numpy(grads, "grads", "unscale_", _FLOATS)
        return super().unscale_(g)


# ---- models ------------------------------------------------------------------------------

@_dataclass(frozen=True)
class ValueInfo:
    """A declared graph input or output. dtype: NumPy's spelling where fpguard has the
    type ('float32', 'bfloat16'), else ONNX's ('float8e4m3fn'); None when undeclared.
    shape: a tuple of ints, dim_param names (str) and None (unknown), or None when no shape
    is declared. kind: 'tensor', 'sequence', 'optional' or 'other'."""
    name: str
    dtype: Optional[str]
    shape: Optional[Tuple[Union[int, str, None], ...]]
    kind: str


@_dataclass(frozen=True)
class Node:
    """A node of the model. name: as in the file ('' when it has none); display_name: the
    name check, plan, keep_fp32 and convert use ('<OpType>_<index>' for unnamed nodes; for
    a node inside an If/Loop/Scan body its path, 'Loop_0/body/Mul_2'); parent: the
    display_name of the control-flow node whose body holds it ('' in the main graph)."""
    name: str
    display_name: str
    op_type: str
    domain: str
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]
    parent: str = ""


class Model:
    """An ONNX model loaded by fpguard.load: path, inputs (the runtime inputs, initializers
    left out), outputs and nodes (the main graph's in file order, each control-flow node
    followed by the nodes of its bodies, nested as deep as the model goes)."""

    def __init__(self, loaded: Any) -> None:
        self._m = loaded
        self.path: str = loaded.path
        self.inputs: List[ValueInfo] = [ValueInfo(*v) for v in loaded.inputs]
        self.outputs: List[ValueInfo] = [ValueInfo(*v) for v in loaded.outputs]
        self.nodes: List[Node] = [Node(*n) for n in loaded.nodes]

    def __repr__(self) -> str:
        return (f"Model(path={self.path!r}, inputs={[v.name for v in self.inputs]}, "
                f"outputs={[v.name for v in self.outputs]}, nodes={len(self.nodes)})")


def load(path: Any) -> Model:
    """Loads an ONNX model (external data beside it) as the CLI does; a bad file raises
    fpguard.Error naming it."""
    return Model(_fpguard.load(_os.fspath(path)))


def _loaded(model: Any) -> Any:
    return (model if isinstance(model, Model) else load(model))._m


def _input_set(inputs: Any, func: str) -> list:
    """{name: array or CPU tensor} as the extension takes it: [(name, array, dtype)]."""
    if not isinstance(inputs, Mapping):
        raise Error(f"inputs: a {type(inputs).__name__} is not a dict of arrays")
    out = []
    for name, x in inputs.items():
        if not isinstance(name, str):
            raise Error(f"inputs: key {name!r} is not an input name")
        where = f"input '{name}'"
        torch = _sys.modules.get("torch")
        if _torch_tensor(x) and x.dtype == torch.bfloat16 and x.device.type == "cpu":
            # NumPy has no bfloat16: its bits, which the executor takes for bfloat16 inputs.
            out.append((name, x.detach().contiguous().view(torch.int16).numpy().view("uint16"),
                        None))
            continue
        out.append((name, _as_numpy(x, where, func, "numeric and bool arrays"), None))
    return out


def run(model: Any, inputs: Mapping[str, Any], precision: Any = None,
        keep_fp32: Sequence[str] = (), keep_fp32_ops: Sequence[str] = (),
        threads: int = 0, other_precision: str = "bfloat16",
        amax_margin: int = 0) -> Dict[str, Any]:
    """Runs `model` (a Model or a path) once on `inputs` ({name: NumPy array or CPU torch
    tensor}, every runtime input, of its declared dtype and shape) and returns {output name:
    NumPy array} in graph order: the graph's output dtypes (bfloat16 as float32); a
    sequence output is a list of arrays, an empty optional None.

    precision: None or 'float32' runs the model as it is; 'float64' is the truth run (every
    floating value in double); any other format (anything finfo takes) is emulated on every
    floating node but those in keep_fp32 (node names) and keep_fp32_ops (op types), as
    `fpguard run --precision` does. A scaled precision (mxfp8_e4m3, nvfp4, fp8,
    channel:float8_e4m3fn, block:E:S:N) quantizes the MatMul/Gemm/Conv operands into it
    and runs the other ops in other_precision; fp8, tensor: and channel: activations are
    scaled by their amax calibrated on `inputs`, times 2**amax_margin. The GIL is released
    while it runs; Ctrl-C stops it."""
    options = (precision, _str(other_precision, "other_precision"),
               _int(amax_margin, "amax_margin"), _strs(keep_fp32, "keep_fp32"),
               _strs(keep_fp32_ops, "keep_fp32_ops"), _int(threads, "threads"))
    return _fpguard.run(_loaded(model), _input_set(inputs, "run"), *options)


class Record:
    """A JSON object of fpguard's reports with its fields as attributes (r.verdict,
    r.outputs[0].cosine) and items (r["verdict"]); nested objects are Records, arrays
    lists. The fields are those of the CLI's --json (docs/check.md, docs/plan.md)."""

    def __init__(self, fields: Dict[str, Any]) -> None:
        object.__setattr__(self, "_fields", fields)

    @staticmethod
    def _wrap(v: Any) -> Any:
        if isinstance(v, dict):
            return Record(v)
        if isinstance(v, list):
            return [Record._wrap(x) for x in v]
        return v

    def __getattr__(self, name: str) -> Any:
        try:
            return Record._wrap(self._fields[name])
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name: str) -> Any:
        return Record._wrap(self._fields[name])

    def __contains__(self, name: str) -> bool:
        return name in self._fields

    def __dir__(self) -> List[str]:
        return list(self._fields)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Record) and self._fields == other._fields

    def keys(self) -> List[str]:
        return list(self._fields)

    def to_dict(self) -> Dict[str, Any]:
        """The fields as plain dicts and lists (a deep copy)."""
        return _json.loads(_json.dumps(self._fields))

    def __repr__(self) -> str:
        return f"Record({', '.join(self._fields)})"


class _Result(Record):
    """A report the extension holds (a diagnosis, a plan) with the fields of its JSON."""

    def __init__(self, held: Any) -> None:
        text = held.json()
        super().__init__(_json.loads(text))
        object.__setattr__(self, "_held", held)
        object.__setattr__(self, "_text", text)

    def to_json(self) -> str:
        """The JSON the CLI writes (`check --json`, plan.json), without a final newline."""
        return self._text

    def html(self, path: Any) -> None:
        """Writes the report as one self-contained HTML page (the CLI's --html),
        atomically and never over the model."""
        self._held.html(_os.fspath(path))


class Diagnosis(_Result):
    """The result of fpguard.check: the fields of `fpguard check --json` for one precision
    (docs/check.md) as attributes: verdict ('pass'/'fail'), outputs, origins (with their
    structured suggestions), nodes, rules, notes, ..."""

    def __repr__(self) -> str:
        f = self._fields
        return (f"Diagnosis(precision={f['precision']!r}, verdict={f['verdict']!r}, "
                f"origins={len(f['origins'])}, rules={len(f['rules'])})")


class Plan(_Result):
    """The result of fpguard.plan: the fields of the plan.json `fpguard plan -o` writes
    (docs/plan.md) as attributes: fp32_nodes, reasons, islands, scaled, meets, ..."""

    def save(self, path: Any) -> None:
        """Writes plan.json atomically (never over the model), as `fpguard plan -o`."""
        self._held.save(_os.fspath(path))

    def __repr__(self) -> str:
        f = self._fields
        return (f"Plan(precision={f['precision']!r}, meets={f['meets']!r}, "
                f"fp32_nodes={f['fp32_nodes']!r})")


def _sets(inputs: Any, func: str) -> Optional[list]:
    if inputs is None:
        return None
    if isinstance(inputs, Mapping):
        return [_input_set(inputs, func)]
    return [_input_set(s, func) for s in inputs]


def _shapes(shape: Optional[Mapping[str, Sequence[int]]]) -> List[str]:
    if shape is not None and not isinstance(shape, Mapping):
        raise _type_error("shape", "a dict {input name: dims}", shape)
    return [f"{k}={','.join(str(_int(d, 'shape')) for d in v)}"
            for k, v in (shape or {}).items()]


def _common_options(precision, keep_fp32, keep_fp32_ops, samples, seed, shape, atol, rtol,
                    min_cosine, saturate, threads, other_precision, amax_margin,
                    keep_unscaled) -> dict:
    """The options check and plan share, their types checked."""
    return dict(precision=precision, keep_fp32=_strs(keep_fp32, "keep_fp32"),
                keep_fp32_ops=_strs(keep_fp32_ops, "keep_fp32_ops"),
                samples=_int(samples, "samples"), seed=_int(seed, "seed"),
                shape=_shapes(shape), atol=_opt_float(atol, "atol"),
                rtol=_opt_float(rtol, "rtol"), min_cosine=_float(min_cosine, "min_cosine"),
                saturate=_bool(saturate, "saturate"), threads=_int(threads, "threads"),
                other_precision=_str(other_precision, "other_precision"),
                amax_margin=_int(amax_margin, "amax_margin"),
                keep_unscaled=_strs(keep_unscaled, "keep_unscaled"))


def check(model: Any, inputs: Any = None, precision: Any = "float16",
          reference: str = "float32", keep_fp32: Sequence[str] = (),
          keep_fp32_ops: Sequence[str] = (), samples: int = 1, seed: int = 0,
          shape: Optional[Mapping[str, Sequence[int]]] = None, atol: Optional[float] = None,
          rtol: Optional[float] = None, min_cosine: float = 0.999,
          fail_on: Sequence[str] = (), disable_rules: Sequence[str] = (),
          accumulate: Optional[str] = None, accumulation: str = "sequential",
          saturate: bool = False, threads: int = 0, other_precision: str = "bfloat16",
          amax_margin: int = 0, keep_unscaled: Sequence[str] = ()) -> Diagnosis:
    """`fpguard check`: where running `model` (a Model or a path) in `precision` breaks,
    and why. Returns a Diagnosis whose attributes are the fields of `check --json`.

    inputs: a dict {name: array or CPU tensor} (one input set, every runtime input), a list
    of such dicts, or None: `samples` sets generated as the CLI generates them (seed,
    seed+1, ...; uniform in [-1, 1] for floating inputs; `shape` {name: dims} fills in
    dynamic dimensions). The other options are the CLI's flags of the same names
    (keep_fp32: --keep-fp32, disable_rules: --disable-rule, ...). A scaled precision
    (mxfp8_e4m3, nvfp4, fp8, ...) runs as in `run`, with other_precision and amax_margin;
    keep_unscaled (--keep-unscaled) runs those MatMul/Gemm/Conv nodes unscaled in
    other_precision. The GIL is released while it runs; Ctrl-C raises KeyboardInterrupt promptly."""
    options = dict(_common_options(precision, keep_fp32, keep_fp32_ops, samples, seed, shape,
                                   atol, rtol, min_cosine, saturate, threads, other_precision,
                                   amax_margin, keep_unscaled),
                   reference=_str(reference, "reference"),
                   fail_on=_strs(fail_on, "fail_on"),
                   disable_rules=_strs(disable_rules, "disable_rules"),
                   accumulate=None if accumulate is None else _str(accumulate, "accumulate"),
                   accumulation=_str(accumulation, "accumulation"))
    return Diagnosis(_fpguard.check(_loaded(model), _sets(inputs, "check"), options))


def plan(model: Any, inputs: Any = None, precision: Any = "float16",
         keep_fp32: Sequence[str] = (), keep_fp32_ops: Sequence[str] = (), samples: int = 1,
         seed: int = 0, shape: Optional[Mapping[str, Sequence[int]]] = None,
         atol: Optional[float] = None, rtol: Optional[float] = None,
         min_cosine: float = 0.999, objective: str = "fewest-fp32", scale: str = "auto",
         max_passes: int = 48, saturate: bool = False, threads: int = 0,
         other_precision: str = "bfloat16", amax_margin: int = 0,
         keep_unscaled: Sequence[str] = ()) -> Plan:
    """`fpguard plan`: the nodes to keep in float32 (and the exact scale rewrites) for
    `model` to meet the tolerance in `precision`. Inputs and options as check's and the
    CLI's flags of the same names (objective: fewest-fp32 or fewest-casts; scale: auto or
    none). Returns a Plan (.save(path) writes plan.json). A scaled precision (mxfp8_e4m3,
    nvfp4, fp8, ...) plans as `fpguard plan` does: the GEMMs its scales break run unscaled
    in other_precision (unscaled_nodes) or stay float32, with other_precision, amax_margin
    and keep_unscaled as in check; convert does not write such a plan."""
    options = dict(_common_options(precision, keep_fp32, keep_fp32_ops, samples, seed, shape,
                                   atol, rtol, min_cosine, saturate, threads, other_precision,
                                   amax_margin, keep_unscaled),
                   objective=_str(objective, "objective"), scale=_str(scale, "scale"),
                   max_passes=_int(max_passes, "max_passes"))
    return Plan(_fpguard.plan(_loaded(model), _sets(inputs, "plan"), options))


def convert(model: Any, plan: Any, out_path: Any, keep_io_types: bool = True,
            precision: Any = None, keep_fp32: Sequence[str] = (),
            keep_fp32_ops: Sequence[str] = (), external_data: bool = False,
            verify: bool = True, inputs: Optional[Mapping[str, Any]] = None,
            min_cosine: float = 0.999, threads: int = 0) -> Dict[str, Any]:
    """`fpguard convert`: writes the mixed-precision model of `plan` (a Plan, the path of a
    plan.json, or None with `precision`) to out_path, atomically and never over the input
    model. keep_io_types: graph inputs and outputs stay float32 (Casts inside).

    verify: then runs the written model against the float32 original on `inputs` (one
    input set as for run; None: the inputs the plan records, else generated as the CLI
    does), with check's criterion (min_cosine). Returns what it did: {path, precision,
    low_nodes, fp32_nodes, casts, initializers_converted, kept_by_spec, warnings,
    verified: [{output, cosine, max_abs_error, nonfinite, pass}], pass (None unverified)}."""
    p = plan._held if isinstance(plan, Plan) else (None if plan is None else _os.fspath(plan))
    options = dict(precision=precision, keep_fp32=_strs(keep_fp32, "keep_fp32"),
                   keep_fp32_ops=_strs(keep_fp32_ops, "keep_fp32_ops"),
                   keep_io_types=_bool(keep_io_types, "keep_io_types"),
                   external_data=_bool(external_data, "external_data"),
                   verify=_bool(verify, "verify"), min_cosine=_float(min_cosine, "min_cosine"),
                   threads=_int(threads, "threads"))
    sets = None if inputs is None else [_input_set(inputs, "convert")]
    return _fpguard.convert(_loaded(model), p, _os.fspath(out_path), sets, options)


# ---- precision experiments ---------------------------------------------------------------

def _rows(text: str, key: str) -> List[Record]:
    return [Record(r) for r in _json.loads(text)[key]]


GEMM_FORMATS = ("float16", "bfloat16", "tf32", "float8_e4m3fn", "float8_e5m2", "float32")


def gemm_error(sizes: Sequence[int] = (128, 256, 512, 1024), formats: Any = GEMM_FORMATS,
               accumulate: str = "float32", accumulation: str = "auto", output: str = "same",
               distribution: str = "normal", samples: int = 1, seed: int = 0,
               threads: int = 0) -> List[Record]:
    """`fpguard gemm-error`: the error of an n x n matrix product with inputs in each of
    `formats` (anything finfo takes), partial sums in `accumulate` ('same': the input
    format) added in `accumulation` order (auto, library, sequential, pairwise, blocked:K),
    rounded to `output`, against the exact truth, beside the classical bounds. One Record
    per (size, format), sizes outer: the rows of `gemm-error --json` (docs/experiments.md).
    distribution: normal or uniform:LO:HI."""
    sizes = [_int(n, "sizes") for n in ([sizes] if isinstance(sizes, int) else sizes)]
    fs = [formats] if isinstance(formats, str) else list(formats)
    text = _fpguard.gemm_error(sizes, fs, _str(accumulate, "accumulate"),
                               _str(accumulation, "accumulation"), _str(output, "output"),
                               _str(distribution, "distribution"), _int(samples, "samples"),
                               _int(seed, "seed"), _int(threads, "threads"))
    return _rows(text, "rows")


def accum(formats: Any = None, value: float = 1.0, start: float = 0.0,
          n: int = 0) -> List[Record]:
    """`fpguard accum`: when a running sum of `value` from `start` stops growing in each of
    `formats` (a name or a list; None: every format, as --all, where a format the values do
    not fit is a row with 'skipped'), and how naive, pairwise and Kahan sums of n terms
    fare (0: the CLI's default). The rows of `accum --json` (docs/experiments.md)."""
    fs = None if formats is None else ([formats] if isinstance(formats, str) else list(formats))
    text = _fpguard.accum(fs, _float(value, "value"), _float(start, "start"), _int(n, "n"))
    return _rows(text, "rows")


def targets(name: Optional[str] = None, format: Any = None) -> List[Record]:
    """`fpguard targets`: the accelerators and the formats each runs natively (matrix,
    vector, integer and scaled formats, recommended and fastest), all of them or the one
    `name` names (sm_86, h100, cdna3, ...). The targets of `targets --json`."""
    text = _fpguard.targets(None if name is None else _str(name, "name"),
                            None if format is None else _str(format, "format"))
    return _rows(text, "targets")
