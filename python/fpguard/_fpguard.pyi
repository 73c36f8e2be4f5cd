# Type stubs of the extension fpguard._fpguard (python/src/*.cpp).
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt

__version__: str

class Error(ValueError): ...

# A format: a name or alias as the CLI takes it, a numpy.dtype or scalar type, a
# torch.dtype, or a finfo.
FormatLike = Union[str, np.dtype[Any], type, Any, "finfo"]

class finfo:
    dtype: str
    bits: int
    eps: float
    max: float
    min: float
    tiny: float
    smallest_normal: float
    smallest_subnormal: float
    resolution: float
    precision: int
    maxexp: int
    minexp: int
    exponent_bits: int
    mantissa_bits: int
    bias: int
    has_inf: bool
    has_subnormals: bool
    nan: str  # "ieee", "fn", "fnuz" or "none"
    nexp: int
    nmant: int
    def __init__(self, type: FormatLike) -> None: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class iinfo:
    dtype: str
    bits: int
    min: int
    max: int
    is_signed: bool
    kind: str  # "i" or "u", as numpy.iinfo
    def __init__(self, type: Union[str, np.dtype[Any], type, Any]) -> None: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

def formats() -> list[finfo]: ...

class scaled_finfo:
    name: str
    dtype: str
    element: finfo
    scale: finfo
    scope: str
    rule: str
    block_size: int
    bits_per_value: float
    block_range_bits: float
    max: float
    smallest_positive: float
    range_bits: float
    def __init__(self, name: str) -> None: ...
    def to_dict(self) -> dict[str, Any]: ...
    def __eq__(self, other: object) -> bool: ...

def _scaled_finfo(type: Any) -> Optional[scaled_finfo]: ...
def integer_types() -> list[iinfo]: ...
def format_names() -> list[str]: ...
def round(
    a: npt.ArrayLike,
    fmt: FormatLike,
    rounding: str = ...,
    saturate: bool = ...,
    flush_subnormals: bool = ...,
    seed: int = ...,
    out: Optional[npt.NDArray[np.floating[Any]]] = ...,
    axis: Optional[int] = ...,
) -> npt.NDArray[np.floating[Any]]: ...
def encode(
    a: npt.ArrayLike,
    fmt: FormatLike,
    rounding: str = ...,
    saturate: bool = ...,
    flush_subnormals: bool = ...,
    seed: int = ...,
    axis: Optional[int] = ...,
) -> Union[npt.NDArray[np.unsignedinteger[Any]], dict[str, npt.NDArray[Any]]]: ...
def decode(codes: npt.ArrayLike, fmt: FormatLike) -> npt.NDArray[np.float64]: ...

class FormatStats:
    format: str
    overflow: int
    underflow: int
    subnormal: int
    precision_loss: int
    max_abs_error: float
    max_rel_error: float
    mean_rel_error: float
    headroom_bits: float  # inf for an all-zero tensor
    scale: float
    scale_for_square: float
    verdict: str  # "ok", "overflow", "underflow", "precision" or "nonfinite"

class Stats:
    name: str
    dtype: str
    shape: tuple[int, ...]
    count: int
    nan: int
    posinf: int
    neginf: int
    zeros: int
    min: float  # NaN where inspect's JSON has null
    max: float
    absmax: float
    min_abs_nonzero: float
    mean: float
    std: float
    exponent_histogram: dict[int, int]
    formats: dict[str, FormatStats]
    def to_dict(self) -> dict[str, Any]: ...

def stats(
    a: npt.ArrayLike,
    formats: Union[FormatLike, list[FormatLike], tuple[FormatLike, ...]],
    margin: float,
    name: str,
    threads: int,
    dtype_name: Optional[str] = ...,
) -> Stats: ...
def safe_divide(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    eps_scale: float = ...,
    fmt: Optional[FormatLike] = ...,
    out: Optional[npt.NDArray[np.floating[Any]]] = ...,
) -> npt.NDArray[np.floating[Any]]: ...
def safe_rsqrt(
    x: npt.ArrayLike,
    eps_scale: float = ...,
    fmt: Optional[FormatLike] = ...,
    out: Optional[npt.NDArray[np.floating[Any]]] = ...,
) -> npt.NDArray[np.floating[Any]]: ...

class LossScaler:
    growth_tracker: int
    def __init__(
        self,
        init_scale: float = ...,
        growth_factor: float = ...,
        backoff_factor: float = ...,
        growth_interval: int = ...,
        enabled: bool = ...,
    ) -> None: ...
    def get_scale(self) -> float: ...
    def get_growth_factor(self) -> float: ...
    def get_backoff_factor(self) -> float: ...
    def get_growth_interval(self) -> int: ...
    def is_enabled(self) -> bool: ...
    def scale(self, loss: float) -> float: ...
    def unscale_(self, grads: Union[npt.NDArray[np.floating[Any]],
                                    list[npt.NDArray[np.floating[Any]]]]) -> bool: ...
    def update(self, found_inf: Optional[bool] = ..., *,
               new_scale: Optional[float] = ...) -> None: ...
    def state_dict(self) -> dict[str, Union[float, int]]: ...
    def load_state_dict(self, state_dict: dict[str, Union[float, int]]) -> None: ...

# ---- models (python/src/model.cpp, check.cpp; the package wraps them) --------------------
_ValueInfoTuple = tuple[str, Optional[str], Optional[tuple[Union[int, str, None], ...]], str]
_NodeTuple = tuple[str, str, str, str, tuple[str, ...], tuple[str, ...], str]
_InputSet = list[tuple[str, npt.NDArray[Any], Optional[str]]]

class _Model:
    @property
    def path(self) -> str: ...
    @property
    def inputs(self) -> list[_ValueInfoTuple]: ...
    @property
    def outputs(self) -> list[_ValueInfoTuple]: ...
    @property
    def nodes(self) -> list[_NodeTuple]: ...

class _Diagnosis:
    def json(self) -> str: ...
    def html(self, path: str) -> None: ...

class _Plan:
    def json(self) -> str: ...
    def save(self, path: str) -> None: ...
    def html(self, path: str) -> None: ...

def load(path: str) -> _Model: ...
def run(
    model: _Model,
    inputs: _InputSet,
    precision: Optional[FormatLike],
    other_precision: str,
    amax_margin: int,
    keep_fp32: list[str],
    keep_fp32_ops: list[str],
    threads: int,
) -> dict[str, Any]: ...
def check(model: _Model, sets: Optional[list[_InputSet]], options: dict[str, Any]) -> _Diagnosis: ...
def plan(model: _Model, sets: Optional[list[_InputSet]], options: dict[str, Any]) -> _Plan: ...
def convert(
    model: _Model,
    plan: Union[_Plan, str, None],
    out_path: str,
    sets: Optional[list[_InputSet]],
    options: dict[str, Any],
) -> dict[str, Any]: ...

# ---- experiments (python/src/experiments.cpp): the CLI's --json text ---------------------
def gemm_error(
    sizes: list[int],
    formats: list[FormatLike],
    accumulate: str,
    accumulation: str,
    output: str,
    distribution: str,
    samples: int,
    seed: int,
    threads: int,
) -> str: ...
def accum(formats: Optional[list[FormatLike]], value: float, start: float, n: int) -> str: ...
def targets(name: Optional[str], format: Optional[str]) -> str: ...
