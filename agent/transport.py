"""Streams training state between two live processes over a two-rank process group.

No disk, no single pickled blob: a small skeleton (names, hyper-parameters, shapes) goes first,
then every tensor goes as itself, split into chunks with a window of sends in flight so the
wire never idles, and the receiver writes each chunk straight into the tensor it will train with
where it already has one. Both sides checksum every chunk (folded per tensor) in their own
thread while gloo's thread keeps the next ones on the wire; the receiver refuses the state
unless every checksum matches. On a 2-core host the checksums still cost CPU the copies need:
bench/agent.py measures the stream at ~0.7-0.75 of raw gloo with them, ~1.0 without.

Between two processes that share a GPU (or peer-accessible GPUs of one host), CUDA tensors skip
all of this and go device to device (cuda_stream.py); this stream carries the rest.
"""

from __future__ import annotations

import collections
import datetime
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from agent import cuda_stream
from agent.skeleton import TensorSpec, encode, tensor_specs, unflatten
from agent.state import Checksum, as_bytes

CHUNK_BYTES = 8 << 20  # a whole number of checksum blocks; gloo is fastest at 8 MiB (bench)
WINDOW = 128  # sends/receives in flight: 1 GiB, as in the best raw gloo pattern (bench)
# Fault injection for tests and demos: the receiver pauses this long after each tensor, so a
# migration lasts long enough to kill its source or target in the middle of it.
RECV_DELAY_ENV = "YOCO_INJECT_RECV_DELAY_S"
# Fault injection for tests: the one receiver that claims (deletes) the file this names flips a
# bit of the state it received, after the checksums passed: a target holding something other
# than the source's state, which only the digest of the moved state (state.digest) tells.
CORRUPT_ONCE_ENV = "YOCO_INJECT_CORRUPT_ONCE"


class TransferError(RuntimeError):
    pass


@dataclass
class Received:
    state: dict
    nbytes: int


def _never() -> bool:
    return False


def pair_group(
    store: dist.Store,
    name: str,
    rank: int,
    timeout_s: float,
    cancelled: Callable[[], bool] = _never,
) -> dist.ProcessGroup:
    """A gloo process group of two: 0 sends, 1 receives. It carries the whole state, or, when
    the two share a device, everything but the CUDA tensors (cuda_stream.py).

    Gloo's rendezvous waits out its whole timeout for a peer that died before it arrived, and
    nothing interrupts it. So it runs on a thread, and this gives up as soon as `cancelled()`
    (the coordinator saw the other side die): the recovery moves on to its next path at once;
    the abandoned thread ends at the timeout."""
    prefixed = dist.PrefixStore(f"xfer/{name}/", store)
    formed: dict = {}

    def form() -> None:
        try:
            formed["group"] = dist.ProcessGroupGloo(
                prefixed, rank, 2, datetime.timedelta(seconds=timeout_s)
            )
        except Exception as error:  # noqa: BLE001 - raised below, in the caller's thread
            formed["error"] = error

    thread = threading.Thread(target=form, daemon=True, name="yoco-pair-group")
    thread.start()
    while thread.is_alive():
        thread.join(0.05)
        if thread.is_alive() and cancelled():
            raise TransferError("the other side of the transfer is gone")
    if "error" in formed:
        raise formed["error"]
    return formed["group"]


def _chunks(tensors: list[torch.Tensor]):
    """(tensor index, is last chunk of it, byte view) in wire order."""
    for i, tensor in enumerate(tensors):
        raw = as_bytes(tensor if tensor.device.type == "cpu" else tensor.cpu())
        n = raw.numel()
        starts = range(0, max(n, 1), CHUNK_BYTES)
        for start in starts:
            yield i, start + CHUNK_BYTES >= n, raw[start : start + CHUNK_BYTES]


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def send_state(group: dist.ProcessGroup, state: dict) -> int:
    """Stream `state` to rank 1 of `group`; returns the bytes moved. CUDA tensors go device to
    device when the receiver can read them there (cuda_stream.py), all else host-staged."""
    device_to_device = cuda_stream.negotiate(group, 0)
    shared = 0
    if device_to_device:
        state, shared = cuda_stream.share(state)
    streamed = _send_host_staged(group, state)
    if device_to_device and not cuda_stream.await_acknowledgement(group):
        raise TransferError("the receiver failed to copy the device-to-device tensors")
    return streamed + shared


def recv_state(group: dist.ProcessGroup, template: dict | None) -> Received:
    """Receive a state from rank 0 of `group`; tensors land in `template`'s tensors where
    path, shape and dtype match."""
    device_to_device = cuda_stream.negotiate(group, 1)
    try:
        received = _recv_host_staged(group, template)
        if device_to_device:
            state, copied = cuda_stream.fetch(received.state, template)
            received = Received(state, received.nbytes + copied)
    except RuntimeError:
        if device_to_device:
            cuda_stream.acknowledge(group, False)
        raise
    if device_to_device:
        cuda_stream.acknowledge(group, True)
    _corrupt_if_claimed(received.state)
    return received


def _corrupt_if_claimed(state: dict) -> None:
    token = os.environ.get(CORRUPT_ONCE_ENV)
    if not token:
        return
    try:
        os.remove(token)
    except FileNotFoundError:
        return  # another receiver claimed it
    first = encode(state).tensors[0]
    with torch.no_grad():
        byte = first.reshape(-1)[:1].view(torch.uint8)
        byte[0] ^= 1


def _send_host_staged(group: dist.ProcessGroup, state: dict) -> int:
    encoded = encode(state)
    tensors = encoded.tensors
    header = torch.frombuffer(bytearray(encoded.skeleton), dtype=torch.uint8)
    group.send([torch.tensor([header.numel()], dtype=torch.int64)], 1, 0).wait()
    group.send([header], 1, 1).wait()
    in_flight: collections.deque = collections.deque()
    sums = torch.zeros(len(tensors), 2, dtype=torch.int64)
    acc = Checksum()
    for tag, (i, last, chunk) in enumerate(_chunks(tensors), start=2):
        # Sum the chunk just before it goes, in this thread, while gloo's own thread keeps the
        # window of earlier chunks moving.
        acc.update(chunk)
        if chunk.numel():
            in_flight.append(group.send([chunk], 1, tag))
        if last:
            sums[i] = torch.tensor([_signed(v) for v in acc.value()])
            acc = Checksum()
        while len(in_flight) >= WINDOW:
            in_flight.popleft().wait()
    while in_flight:
        in_flight.popleft().wait()
    group.send([sums], 1, 0).wait()
    return sum(t.numel() * t.element_size() for t in tensors)


def _recv_host_staged(group: dist.ProcessGroup, template: dict | None) -> Received:
    length = torch.zeros(1, dtype=torch.int64)
    group.recv([length], 0, 0).wait()
    header = torch.empty(int(length.item()), dtype=torch.uint8)
    group.recv([header], 0, 1).wait()
    skeleton = header.numpy().tobytes()
    own = {}
    if template is not None:
        mine = encode(template)
        own = dict(zip(mine.paths, mine.tensors, strict=True))
    tensors = [_destination(spec, own.get(spec.path)) for spec in tensor_specs(skeleton)]
    in_flight: collections.deque = collections.deque()
    sums = torch.zeros(len(tensors), 2, dtype=torch.int64)
    delay = float(os.environ.get(RECV_DELAY_ENV, "0"))
    acc = Checksum()

    def settle_oldest():
        nonlocal acc
        work, i, last, chunk = in_flight.popleft()
        if work is not None:
            work.wait()
        if delay:
            time.sleep(delay)
        # Sum the chunk right after it landed, while it is in cache and the next ones arrive.
        acc.update(chunk)
        if last:
            sums[i] = torch.tensor([_signed(v) for v in acc.value()])
            acc = Checksum()

    for tag, (i, last, chunk) in enumerate(_chunks(tensors), start=2):
        work = group.recv([chunk], 0, tag) if chunk.numel() else None
        in_flight.append((work, i, last, chunk))
        while len(in_flight) >= WINDOW:
            settle_oldest()
    while in_flight:
        settle_oldest()
    expected = torch.zeros_like(sums)
    group.recv([expected], 0, 0).wait()
    bad = (expected != sums).any(dim=1).nonzero().flatten().tolist()
    if bad:
        raise TransferError(f"checksum mismatch in {len(bad)} of {len(tensors)} tensors")
    nbytes = sum(t.numel() * t.element_size() for t in tensors)
    return Received(unflatten(skeleton, tensors), nbytes)


def _destination(spec: TensorSpec, mine: torch.Tensor | None) -> torch.Tensor:
    """The receiver's own tensor at the same place when the bytes can land in it, else a new
    one."""
    fits = (
        type(mine) is torch.Tensor
        and tuple(mine.shape) == spec.shape
        and mine.dtype == spec.dtype
        and mine.is_contiguous()
        and mine.device.type == "cpu"
    )
    return mine.detach() if fits else torch.empty(spec.shape, dtype=spec.dtype)
