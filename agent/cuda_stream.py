"""The device-to-device state stream: CUDA tensors copied from the sender's GPU memory straight
into the receiver's, through CUDA IPC, without touching host memory or the wire.

It wraps the host-staged stream (transport.py) rather than replacing it:

    both ends:  exchange Endpoints over the pair group; devices.device_to_device decides
    sender:     each CUDA tensor of the state -> a SharedTensor (its IPC handle, a few bytes)
    both:       the host-staged stream carries the rest (skeleton, CPU tensors, the handles)
    receiver:   opens each handle and copies device to device into the tensor it will train
                with, synchronises, closes the handles, then acknowledges
    sender:     returns only after the acknowledgement, so nothing changes the source tensors
                while they are read

A tensor that cannot be shared (e.g. memory from an allocator without IPC support) stays a
tensor and takes the host-staged path; a pair that cannot use IPC (different hosts, CPU, devices
masked differently) takes it for everything. No checksum on this path: the bytes never cross a
network or host buffer, the copy engine moves them within (ECC-protected) device memory.
YOCO_STATE_PATH=host turns this path off (an operator's escape hatch, and the bench's baseline).
"""

from __future__ import annotations

import collections
import copy
import math
import os
import pickle
from dataclasses import dataclass

import torch
import torch.distributed as dist

from agent.devices import Endpoint, device_to_device, here

PATH_ENV = "YOCO_STATE_PATH"  # "auto" (default) or "host"


@dataclass(frozen=True)
class SharedTensor:
    """A CUDA tensor as a CUDA IPC handle: what torch.multiprocessing pickles for it."""

    rebuild: tuple  # (function, arguments) from torch.multiprocessing.reductions.reduce_tensor
    shape: tuple[int, ...]
    dtype: torch.dtype

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def negotiate(group: dist.ProcessGroup, rank: int) -> bool:
    """Both ends of a pair group (0 sends the state, 1 receives it) learn whether this transfer
    goes device to device. Each end sends its Endpoint (None when the path is turned off here)
    and decides on the same two, so they agree."""
    mine = here() if os.environ.get(PATH_ENV, "auto") != "host" else None
    theirs = _exchange(group, rank, mine)
    if mine is None or theirs is None:
        return False
    source, target = (mine, theirs) if rank == 0 else (theirs, mine)
    return device_to_device(source, target)


ENDPOINT_BYTES = 4096  # one fixed-size message each way: an Endpoint pickles to well under this


def _exchange(group: dist.ProcessGroup, rank: int, endpoint: Endpoint | None) -> Endpoint | None:
    blob = pickle.dumps(endpoint)
    if len(blob) > ENDPOINT_BYTES - 8:  # a host with very many GPUs: describe it as CPU
        blob = pickle.dumps(None)
    mine = torch.zeros(ENDPOINT_BYTES, dtype=torch.uint8)
    mine[:8] = torch.tensor([len(blob)], dtype=torch.int64).view(torch.uint8)
    mine[8 : 8 + len(blob)] = torch.frombuffer(bytearray(blob), dtype=torch.uint8)
    theirs = torch.empty(ENDPOINT_BYTES, dtype=torch.uint8)
    peer = 1 - rank
    # Rank 0 speaks first: the two messages cannot cross, whatever the transport buffers.
    if rank == 0:
        group.send([mine], peer, 0).wait()
    group.recv([theirs], peer, 0).wait()
    if rank == 1:
        group.send([mine], peer, 0).wait()
    length = int(theirs[:8].view(torch.int64).item())
    return pickle.loads(theirs[8 : 8 + length].numpy().tobytes())


def share(state):
    """The state with every CUDA tensor replaced by a SharedTensor; (state, bytes shared). The
    state itself is not changed (its dicts may be the optimizer's own)."""
    from torch.multiprocessing.reductions import reduce_tensor

    shared = 0

    def leaf(value, _):
        nonlocal shared
        if type(value) not in (torch.Tensor, torch.nn.Parameter) or not value.is_cuda:
            return value
        if value.layout != torch.strided:
            return value
        try:
            handle = reduce_tensor(value.detach())
        except Exception:  # not shareable (allocator, driver): this one takes the host path
            return value
        shared += value.numel() * value.element_size()
        return SharedTensor(handle, tuple(value.shape), value.dtype)

    # Work queued on the current stream (the last optimizer step) must land before the receiver
    # reads; the IPC event torch records covers it too, this makes it independent of streams.
    torch.cuda.current_stream().synchronize()
    return _replace(state, leaf, None), shared


def fetch(received, template):
    """Replace every SharedTensor of `received` by its bytes, copied device to device into the
    tensor at the same place in `template` where shape and dtype match (the receiver trains with
    that one), else into a new tensor on this process's device. Returns (state, bytes copied)."""
    opened: list[torch.Tensor] = []  # the sender's memory, mapped here until the copies are done
    copied = 0

    def leaf(value, mine):
        nonlocal copied
        if not isinstance(value, SharedTensor):
            return value
        function, arguments = value.rebuild
        remote = function(*arguments)
        opened.append(remote)
        fits = (
            isinstance(mine, torch.Tensor)
            and tuple(mine.shape) == value.shape
            and mine.dtype == value.dtype
        )
        target = mine.detach() if fits else torch.empty_like(remote, device="cuda")
        target.copy_(remote, non_blocking=True)
        copied += value.nbytes
        return target

    state = _replace(received, leaf, template)
    torch.cuda.synchronize()
    opened.clear()  # closes the IPC mappings: the sender may free or change its tensors now
    return state, copied


def _replace(value, leaf, mine):
    """`value` with `leaf(x, counterpart of x in mine)` in place of every leaf x, through
    dicts, lists and tuples (copied: the originals stay as they are; copy.copy keeps an
    OrderedDict's `_metadata`, which load_state_dict reads). Other containers are leaves."""
    if type(value) in (dict, collections.OrderedDict):
        own = mine if isinstance(mine, dict) else {}
        out = copy.copy(value)
        for key, item in value.items():
            out[key] = _replace(item, leaf, own.get(key))
        return out
    if type(value) in (list, tuple):
        own = mine if isinstance(mine, list | tuple) and len(mine) == len(value) else None
        items = [_replace(v, leaf, own[i] if own else None) for i, v in enumerate(value)]
        return type(value)(items)
    return leaf(value, mine)


def acknowledge(group: dist.ProcessGroup, ok: bool) -> None:
    """Receiver: tell the sender its tensors are no longer read (ok) or the copy failed."""
    group.send([torch.tensor([1 if ok else 0])], 0, 0).wait()


def await_acknowledgement(group: dist.ProcessGroup) -> bool:
    """Sender: wait until the receiver has copied (True) or failed (False)."""
    reply = torch.zeros(1, dtype=torch.int64)
    group.recv([reply], 1, 0).wait()
    return bool(reply.item())
