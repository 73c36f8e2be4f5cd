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
) -> npt.NDArray[np.floating[Any]]: ...
def encode(
    a: npt.ArrayLike,
    fmt: FormatLike,
    rounding: str = ...,
    saturate: bool = ...,
    flush_subnormals: bool = ...,
    seed: int = ...,
) -> npt.NDArray[np.unsignedinteger[Any]]: ...
def decode(codes: npt.ArrayLike, fmt: FormatLike) -> npt.NDArray[np.float64]: ...
