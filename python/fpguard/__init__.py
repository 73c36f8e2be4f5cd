"""fpguard from Python: low-precision formats, rounding, tensor statistics, safe
elementwise operations, loss scaling, and models: load, run, check, plan, convert
(docs/python.md).

The work is done by the C++ library (fpguard._fpguard); this layer only lets torch
tensors in and out. torch is never imported by fpguard: a tensor or dtype given to it
comes from a torch the caller has imported.
"""
from __future__ import annotations

import json as _json
import os as _os
import sys as _sys
from dataclasses import dataclass as _dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union


from . import _fpguard
from ._fpguard import (Error, FormatStats, Stats, __version__, finfo, format_names, formats,
                       iinfo, integer_types)

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
    "check",
    "convert",
    "decode",
    "encode",
    "finfo",
    "format_names",
    "formats",
    "iinfo",
    "integer_types",
    "load",
    "plan",
    "round",
    "run",
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
    """A node of the main graph. name: as in the file ('' when it has none); display_name:
    the name check, plan and convert use ('<OpType>_<index>' for unnamed nodes)."""
    name: str
    display_name: str
    op_type: str
    domain: str
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]


class Model:
    """An ONNX model loaded by fpguard.load: path, inputs (the runtime inputs, initializers
    left out), outputs and nodes (main graph, in file order)."""

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
        threads: int = 0) -> Dict[str, Any]:
    """Runs `model` (a Model or a path) once on `inputs` ({name: NumPy array or CPU torch
    tensor}, every runtime input, of its declared dtype and shape) and returns {output name:
    NumPy array} in graph order: the graph's output dtypes (bfloat16 as float32); a
    sequence output is a list of arrays, an empty optional None.

    precision: None or 'float32' runs the model as it is; 'float64' is the truth run (every
    floating value in double); any other format (anything finfo takes) is emulated on every
    floating node but those in keep_fp32 (node names) and keep_fp32_ops (op types), as
    `fpguard run --precision` does. The GIL is released while it runs; Ctrl-C stops it."""
    return _fpguard.run(_loaded(model), _input_set(inputs, "run"), precision, list(keep_fp32),
                        list(keep_fp32_ops), threads)


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
    return [f"{k}={','.join(str(d) for d in v)}" for k, v in (shape or {}).items()]


def check(model: Any, inputs: Any = None, precision: Any = "float16",
          reference: str = "float32", keep_fp32: Sequence[str] = (),
          keep_fp32_ops: Sequence[str] = (), samples: int = 1, seed: int = 0,
          shape: Optional[Mapping[str, Sequence[int]]] = None, atol: Optional[float] = None,
          rtol: Optional[float] = None, min_cosine: float = 0.999,
          fail_on: Sequence[str] = (), disable_rules: Sequence[str] = (),
          accumulate: Optional[str] = None, accumulation: str = "sequential",
          saturate: bool = False, threads: int = 0) -> Diagnosis:
    """`fpguard check`: where running `model` (a Model or a path) in `precision` breaks,
    and why. Returns a Diagnosis whose attributes are the fields of `check --json`.

    inputs: a dict {name: array or CPU tensor} (one input set, every runtime input), a list
    of such dicts, or None: `samples` sets generated as the CLI generates them (seed,
    seed+1, ...; uniform in [-1, 1] for floating inputs; `shape` {name: dims} fills in
    dynamic dimensions). The other options are the CLI's flags of the same names
    (keep_fp32: --keep-fp32, disable_rules: --disable-rule, ...). The GIL is released
    while it runs; Ctrl-C raises KeyboardInterrupt promptly."""
    options = dict(precision=precision, reference=reference, keep_fp32=list(keep_fp32),
                   keep_fp32_ops=list(keep_fp32_ops), samples=samples, seed=seed,
                   shape=_shapes(shape), atol=atol, rtol=rtol, min_cosine=min_cosine,
                   fail_on=list(fail_on), disable_rules=list(disable_rules),
                   accumulate=accumulate, accumulation=accumulation, saturate=saturate,
                   threads=threads)
    return Diagnosis(_fpguard.check(_loaded(model), _sets(inputs, "check"), options))


def plan(model: Any, inputs: Any = None, precision: Any = "float16",
         keep_fp32: Sequence[str] = (), keep_fp32_ops: Sequence[str] = (), samples: int = 1,
         seed: int = 0, shape: Optional[Mapping[str, Sequence[int]]] = None,
         atol: Optional[float] = None, rtol: Optional[float] = None,
         min_cosine: float = 0.999, objective: str = "fewest-fp32", scale: str = "auto",
         max_passes: int = 48, saturate: bool = False, threads: int = 0) -> Plan:
    """`fpguard plan`: the nodes to keep in float32 (and the exact scale rewrites) for
    `model` to meet the tolerance in `precision`. Inputs and options as check's and the
    CLI's flags of the same names (objective: fewest-fp32 or fewest-casts; scale: auto or
    none). Returns a Plan (.save(path) writes plan.json)."""
    options = dict(precision=precision, keep_fp32=list(keep_fp32),
                   keep_fp32_ops=list(keep_fp32_ops), samples=samples, seed=seed,
                   shape=_shapes(shape), atol=atol, rtol=rtol, min_cosine=min_cosine,
                   objective=objective, scale=scale, max_passes=max_passes,
                   saturate=saturate, threads=threads)
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
    options = dict(precision=precision, keep_fp32=list(keep_fp32),
                   keep_fp32_ops=list(keep_fp32_ops), keep_io_types=keep_io_types,
                   external_data=external_data, verify=verify, min_cosine=min_cosine,
                   threads=threads)
    sets = None if inputs is None else [_input_set(inputs, "convert")]
    return _fpguard.convert(_loaded(model), p, _os.fspath(out_path), sets, options)
