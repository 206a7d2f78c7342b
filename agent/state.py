"""What a worker's training state is, and the checksums that guard it in transit.

Two kinds of state (SPEC 2.1):
* *replicated*: model, optimizer, scheduler, extras. Identical on every data-parallel rank after
  a completed step, so any healthy replica can hand it to a spare.
* *per-rank*: RNG streams and data position. Different on every rank; each step the reducer
  mirrors every rank's copy to every peer (see reducer.py), so it survives its owner.

A sharded model (FSDP2, `Run.device_mesh`) holds a shard per rank instead of a replica: its
parameters and optimizer state are DTensors, and what moves is each one's local shard
(`Registry.transfer_state`), loaded back as DTensors of the receiver's own mesh and placements.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import random
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch.distributed.tensor import DTensor

from agent.skeleton import encode


class Stateful(Protocol):
    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> Any: ...


def as_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """A flat uint8 view of a contiguous tensor's storage, whatever its dtype (a copy for a
    non-contiguous or expanded tensor, or a lazily conjugated / negated view)."""
    if tensor.numel() == 0:  # may carry any strides, which view() refuses
        return torch.empty(0, dtype=torch.uint8)
    flat = tensor.detach().resolve_conj().resolve_neg().reshape(-1)
    if flat.stride(0) != 1:  # a non-contiguous or expanded tensor, or a 1-element slice
        flat = torch.empty(flat.shape, dtype=flat.dtype, device=flat.device).copy_(flat)
    return flat.view(torch.uint8)


_BLOCK_WORDS = 64


def checksum(tensor: torch.Tensor) -> tuple[int, int]:
    """A Fletcher-style 64-bit checksum: the sum of the tensor's 8-byte words, and the sum of its
    512-byte block sums weighted by block position (catches misplaced blocks, not only flipped
    bits). One pass over memory; see `Checksum` for the incremental form the transport uses."""
    acc = Checksum()
    acc.update(as_bytes(tensor))
    return acc.value()


BLOCK_BYTES = _BLOCK_WORDS * 8


class Checksum:
    """`checksum` computed piece by piece, so each chunk is summed while it is still in cache
    (right before it is sent, right after it arrived). Every piece but the last must be a
    whole number of 512-byte blocks; the result equals `checksum` of the whole tensor."""

    def __init__(self):
        self.plain = 0
        self.positional = 0
        self.blocks = 0  # blocks seen so far: the weight offset of the next piece

    def update(self, raw: torch.Tensor) -> None:
        if raw.device.type != "cpu":
            raw = raw.cpu()
        n = raw.numel()
        whole = n // 8 * 8
        words = raw[:whole].view(torch.int64)
        blocks = words.numel() // _BLOCK_WORDS
        rest = int(raw[whole:].to(torch.int64).sum()) if whole < n else 0
        if blocks * _BLOCK_WORDS < words.numel():
            rest_words = int(words[blocks * _BLOCK_WORDS :].sum())
        else:
            rest_words = 0
        if blocks:
            # One pass over the data; the second sum and the weighting touch 1/64 of it.
            sums = words[: blocks * _BLOCK_WORDS].view(blocks, _BLOCK_WORDS).sum(dim=1)
            weights = torch.arange(self.blocks + 1, self.blocks + blocks + 1, dtype=torch.int64)
            self.plain += int(sums.sum())
            self.positional += int(sums.mul_(weights).sum())
        self.plain += rest_words + rest
        self.positional += rest_words
        self.blocks += blocks

    def value(self) -> tuple[int, int]:
        return self.plain & (2**64 - 1), self.positional & (2**64 - 1)


def digest(state: Any) -> str:
    """A SHA-256 digest of a state tree as the transport moves it (agent/skeleton.py): its
    skeleton (structure, every non-tensor value, each tensor's shape and dtype, not its device:
    a GPU worker's state may land on a CPU spare), then every tensor's bytes in the skeleton's
    order. Source and target of a migration each take it,
    the source of what it sent, the target of what it received and loaded, so the coordinator
    can tell that the target holds exactly the source's state (`verified`), whatever path the
    bytes took (the device-to-device one has no checksum of its own).

    Cheap enough: one read of the state, with no copy on the host (a CUDA tensor is copied to
    host memory first), at SHA-256's speed with the SHA extensions every recent x86 and ARM
    server CPU has, ~1.5 GB/s on one core of the 2-core test host against ~0.65 GB/s for
    BLAKE2b; hashlib releases the GIL while it hashes. Both ends hash at once, each in its own
    process, so a migration waits for one pass, not two.
    A value the skeleton pickles is compared by its pickle, which the target makes anew: the
    same bytes for what state_dicts hold (numbers, strings, torch.Size), not for a set of
    strings (its order follows each process's hash seed), which would read as a mismatch."""
    encoded = encode(state)
    skeleton = json.dumps(_without_devices(json.loads(encoded.skeleton)), separators=(",", ":"))
    hasher = hashlib.sha256(skeleton.encode())
    for tensor in encoded.tensors:
        hasher.update(as_bytes(tensor).cpu().numpy())
    return hasher.hexdigest()


def _without_devices(node):
    """A skeleton node with every tensor's device left out (skeleton.py: a tensor's node is
    ["tensor", index, shape, dtype, device, requires_grad])."""
    if not isinstance(node, list):
        return node
    if node and node[0] == "tensor":
        return [*node[:4], None, node[5]]
    return [_without_devices(child) for child in node]


@dataclass
class Registry:
    """What the training script registered (see runtime.Run.register)."""

    models: list[torch.nn.Module] = field(default_factory=list)
    optimizers: list[torch.optim.Optimizer] = field(default_factory=list)
    schedulers: list[Stateful] = field(default_factory=list)
    data: Stateful | None = None
    extras: dict[str, Stateful] = field(default_factory=dict)
    per_rank: dict[str, Stateful] = field(default_factory=dict)
    sharded: bool = False  # the models are FSDP2-sharded: their state is this rank's shard

    def is_empty(self) -> bool:
        return not self.models and not self.optimizers

    def replicated_state(self, step: int) -> dict:
        """References (not copies) to the replicated state, so a receiver can fill it in place."""
        return {
            "step": step,
            "models": [m.state_dict() for m in self.models],
            "optimizers": [o.state_dict() for o in self.optimizers],
            "schedulers": [s.state_dict() for s in self.schedulers],
            "extras": {name: obj.state_dict() for name, obj in self.extras.items()},
        }

    def load_replicated_state(self, state: dict) -> int:
        for model, sd in zip(self.models, state["models"], strict=True):
            model.load_state_dict(sd)
        for optimizer, sd in zip(self.optimizers, state["optimizers"], strict=True):
            optimizer.load_state_dict(sd)
        for scheduler, sd in zip(self.schedulers, state["schedulers"], strict=True):
            scheduler.load_state_dict(sd)
        for name, obj in self.extras.items():
            obj.load_state_dict(state["extras"][name])
        return int(state["step"])

    def transfer_state(self, step: int) -> dict:
        """What a spare taking this rank's place needs besides the per-rank state: the
        replicated state, or for a sharded model this rank's shards of it (plain tensors
        sharing the DTensors' storage, so a receiver's stream lands in its own shards)."""
        state = self.replicated_state(step)
        return local_shards(state) if self.sharded else state

    def load_transfer_state(self, state: dict) -> int:
        """Load what `transfer_state` gave; the received shards become DTensors again, on this
        process's mesh with its placements."""
        if self.sharded:
            state = as_dtensors(state, self.replicated_state(int(state["step"])))
        return self.load_replicated_state(state)

    def per_rank_state(self) -> dict:
        return {
            **rng_state(),
            "data": self.data.state_dict() if self.data is not None else None,
            "per_rank": {name: obj.state_dict() for name, obj in self.per_rank.items()},
        }

    def load_per_rank_state(self, state: dict) -> None:
        load_rng_state(state)
        if self.data is not None:
            self.data.load_state_dict(state["data"])
        for name, obj in self.per_rank.items():
            obj.load_state_dict(state["per_rank"][name])


def local_shards(node):
    """`node` (a state tree, a list of gradients) with every DTensor replaced by its shard."""
    return _map_dtensors(node, DTensor.to_local)


def _map_dtensors(node, fn):
    """`node` with every DTensor replaced by fn(it); dicts keep their type and `_metadata`."""
    if isinstance(node, DTensor):
        return fn(node)
    if isinstance(node, dict):
        mapped = type(node)((key, _map_dtensors(value, fn)) for key, value in node.items())
        if hasattr(node, "_metadata"):
            mapped._metadata = node._metadata
        return mapped
    if isinstance(node, list | tuple):
        return type(node)(_map_dtensors(value, fn) for value in node)
    return node


def as_dtensors(received, template):
    """`received` with each tensor that is a DTensor in `template` (same place) wrapped as one,
    with the template's mesh, placements and global shape."""
    if isinstance(template, DTensor):
        return DTensor.from_local(
            received,
            template.device_mesh,
            template.placements,
            run_check=False,
            shape=template.shape,
            stride=template.stride(),
        )
    if isinstance(received, dict) and isinstance(template, dict):
        mapped = type(received)(
            (key, as_dtensors(value, template.get(key))) for key, value in received.items()
        )
        if hasattr(received, "_metadata"):
            mapped._metadata = received._metadata
        return mapped
    if isinstance(received, list | tuple) and isinstance(template, list | tuple):
        return type(received)(
            as_dtensors(value, other) for value, other in zip(received, template, strict=False)
        )
    return received


def rng_state() -> dict:
    """The global random streams: torch's (CPU, and every CUDA device's), Python's, NumPy's."""
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    try:
        import numpy

        state["numpy"] = numpy.random.get_state()
    except ImportError:
        pass
    return state


def load_rng_state(state: dict) -> None:
    """Put the streams `rng_state` took (and any state holding its keys) back."""
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])
    if "numpy" in state:
        import numpy

        numpy.random.set_state(state["numpy"])


def encode_per_rank(state: dict) -> bytes:
    """Per-rank state is a few kilobytes of RNG words and counters; it rides in the gradient
    all-reduce every step (reducer.py), so it is serialised compactly."""
    return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)


def decode_per_rank(blob: bytes) -> dict:
    return pickle.loads(blob)
