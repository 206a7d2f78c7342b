"""A typed encoding of whatever a `state_dict()` returns: a small skeleton and its tensors.

The skeleton is JSON in which every value says what it is (`["tuple", [...]]`, `["int", "0xc"]`,
`["tensor", 3, [2, 4], "float32", "cpu", null]`, ...), decided by the value's exact type, never
by what attributes it happens to have: a `str` is a string even though it has `.index`, a tuple
stays a tuple, an int key stays an int, an `OrderedDict` keeps the `_metadata` that
`load_state_dict` reads, `bool` is not `int`, and a big int (NumPy's PCG64 state) or a NaN float
crosses exactly.
Values of any other type (NumPy arrays, `torch.Size`, a class of the user's) are pickled into
the skeleton under an explicit `pickle` tag; one that cannot be pickled is refused when encoded,
with its path. Tensors are listed beside the skeleton in a fixed order, so they can travel (or
be stored) one by one and be received in place; the skeleton records each one's shape and dtype.

Used by the transport (agent/transport.py) and the checkpoint fallback (agent/checkpoint.py),
so both carry exactly the same states.
"""

from __future__ import annotations

import base64
import json
import pickle
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


class EncodingError(TypeError):
    pass


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of a skeleton: where it sits in the state and what it holds."""

    index: int
    path: tuple
    shape: tuple[int, ...]
    dtype: torch.dtype


@dataclass
class Encoded:
    skeleton: bytes  # UTF-8 JSON
    tensors: list[torch.Tensor]  # as found in the state (maybe non-contiguous, maybe on a GPU)
    paths: list[tuple]  # where each tensor sits, for matching against a receiver's own state


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise EncodingError(f"unknown tensor dtype {name!r}")
    return dtype


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def encode(obj: Any) -> Encoded:
    tensors: list[torch.Tensor] = []
    paths: list[tuple] = []

    def walk(value, path: tuple):
        kind = type(value)
        if value is None:
            return ["none"]
        if kind is bool:
            return ["bool", value]
        if kind is int:
            return ["int", hex(value)]  # hex: no digit limit, exact at any size
        if kind is float:
            return ["float", value.hex()]
        if kind is complex:
            return ["complex", value.real.hex(), value.imag.hex()]
        if kind is str:
            return ["str", value]
        if kind is bytes:
            return ["bytes", _b64(value)]
        if kind is list or kind is tuple:
            return [kind.__name__, [walk(v, (*path, i)) for i, v in enumerate(value)]]
        if kind is dict or kind is OrderedDict:
            items = [[walk(k, (*path, "<key>")), walk(v, (*path, k))] for k, v in value.items()]
            node = ["dict" if kind is dict else "odict", items]
            metadata = getattr(value, "_metadata", None)  # module versions, read on load
            if metadata is not None:
                node.append(walk(metadata, (*path, "<metadata>")))
            return node
        if kind in (torch.Tensor, torch.nn.Parameter) and value.layout == torch.strided:
            tensors.append(value)
            paths.append(path)
            return [
                "tensor",
                len(tensors) - 1,
                list(value.shape),
                _dtype_name(value.dtype),
                value.device.type,
                value.requires_grad if kind is torch.nn.Parameter else None,
            ]
        try:
            return ["pickle", _b64(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))]
        except Exception as error:  # noqa: BLE001 - any pickling failure: say where and what
            raise EncodingError(
                f"state at {_where(path)} is a {kind.__qualname__} that cannot be sent: {error}"
            ) from error

    root = walk(obj, ())
    return Encoded(json.dumps(root, separators=(",", ":")).encode(), tensors, paths)


def _where(path: tuple) -> str:
    return "/".join(map(str, path)) or "the top level"


def tensor_specs(skeleton: bytes) -> list[TensorSpec]:
    """The tensors a skeleton refers to, by index."""
    specs: list[TensorSpec] = []
    decode(skeleton, lambda spec: specs.append(spec) or torch.empty(0))
    return sorted(specs, key=lambda s: s.index)


def decode(skeleton: bytes, tensor_for: Callable[[TensorSpec], torch.Tensor]) -> Any:
    """Rebuild the state; `tensor_for(spec)` gives the tensor that goes at each tensor's place
    (already received, or the buffer it will be received into)."""

    def walk(node, path: tuple):
        tag = node[0]
        if tag == "none":
            return None
        if tag == "bool":
            return bool(node[1])
        if tag == "int":
            return int(node[1], 16)
        if tag == "float":
            return float.fromhex(node[1])
        if tag == "complex":
            return complex(float.fromhex(node[1]), float.fromhex(node[2]))
        if tag == "str":
            return node[1]
        if tag == "bytes":
            return base64.b64decode(node[1])
        if tag == "list":
            return [walk(v, (*path, i)) for i, v in enumerate(node[1])]
        if tag == "tuple":
            return tuple(walk(v, (*path, i)) for i, v in enumerate(node[1]))
        if tag in ("dict", "odict"):
            out = {} if tag == "dict" else OrderedDict()
            for k, v in node[1]:
                key = walk(k, (*path, "<key>"))
                out[key] = walk(v, (*path, key))
            if len(node) > 2:
                out._metadata = walk(node[2], (*path, "<metadata>"))
            return out
        if tag == "tensor":
            _, index, shape, dtype, device, parameter = node
            spec = TensorSpec(index, path, tuple(shape), _dtype(dtype))
            tensor = tensor_for(spec)
            if device == "cuda" and torch.cuda.is_available() and tensor.device.type == "cpu":
                tensor = tensor.to(torch.cuda.current_device())
            if parameter is None:
                return tensor
            return torch.nn.Parameter(tensor, requires_grad=parameter)
        if tag == "pickle":
            return pickle.loads(base64.b64decode(node[1]))
        raise EncodingError(f"unknown skeleton tag {tag!r} at {_where(path)}")

    return walk(json.loads(skeleton), ())


def flatten(obj: Any) -> tuple[bytes, list[torch.Tensor]]:
    encoded = encode(obj)
    return encoded.skeleton, encoded.tensors


def unflatten(skeleton: bytes, tensors: list[torch.Tensor]) -> Any:
    return decode(skeleton, lambda spec: tensors[spec.index])
