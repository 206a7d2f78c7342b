"""Deterministic data-parallel gradient reduction, with the per-rank state mirror riding along.

Why not DDP: DDP rebuilds its buckets after the first iteration of every new instance, and gloo's
ring sums an element in an order that depends on where it sits in its bucket. A spare that
joins mid-run would therefore reduce in a different order than the rank it replaces, and the
run would stop being bit-for-bit reproducible. Here every rank, old or new, reduces one flat
buffer whose layout is fixed by parameter registration order, so every element is summed in
the same order in every generation of the process group.

Gradients are reduced by the time `backward()` returns, as DDP does: the first gradient hook of a
backward queues a callback on the autograd engine that waits for every bucket and averages. So
clipping or inspecting gradients after `backward()` sees the reduced gradient.

The step's tail, reduced when the step ends (`all_reduce`), holds three regions:

    [ pause flags (N) | model buffers (B) | per-rank state slots (N x W) ]

Each rank writes its own pause flag and its own per-rank state (RNG, data position) into its
own slot and zeros into the others; the SUM all-reduce is then an all-gather of those for free
(x + 0 == x exactly, and slot words are integers below 2**24, exact in float32). Rank 0 writes
the models' float32 buffers (BatchNorm statistics), the others zeros: every rank continues with
rank 0's buffers, as DDP broadcasts them before each forward. After a
completed step every rank therefore holds every peer's per-rank state as of the start of the
next step: the buddy mirror an unplanned migration needs. And because every rank sees the same
flag sum, all ranks agree on the step at which to pause for a planned migration without an
extra collective.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.autograd import Variable

BYTES_PER_WORD = 3  # 24-bit integers are exact in float32


class SlotOverflow(RuntimeError):
    pass


def _words_for(nbytes: int) -> int:
    return 1 + -(-nbytes // BYTES_PER_WORD)  # a length word, then the payload


def encode_slot(blob: bytes, words: int) -> torch.Tensor:
    if _words_for(len(blob)) > words:
        raise SlotOverflow(
            f"per-rank state grew to {len(blob)} bytes; the mirror slot holds "
            f"{(words - 1) * BYTES_PER_WORD}. Keep per-rank state small (RNG, data position)."
        )
    padded = blob + b"\0" * (-len(blob) % BYTES_PER_WORD)
    triples = np.frombuffer(padded, dtype=np.uint8).reshape(-1, BYTES_PER_WORD).astype(np.int32)
    values = triples[:, 0] | (triples[:, 1] << 8) | (triples[:, 2] << 16)
    slot = torch.zeros(words, dtype=torch.float32)
    slot[0] = len(blob)
    slot[1 : 1 + len(values)] = torch.from_numpy(values.astype(np.float32))
    return slot


def decode_slot(slot: torch.Tensor) -> bytes:
    values = slot.cpu().to(torch.int64).numpy()
    length = int(values[0])
    payload = values[1 : 1 + _words_for(length) - 1]
    triples = np.stack([payload & 0xFF, (payload >> 8) & 0xFF, (payload >> 16) & 0xFF], axis=1)
    return triples.astype(np.uint8).tobytes()[:length]


BUCKET_BYTES = 8 << 20  # gradient bucket size for overlapping the all-reduce with backward


class AccumulationError(RuntimeError):
    pass


class FlatReducer:
    """Gradients live in one flat float32 buffer laid out in parameter registration order. It
    is reduced in fixed buckets (whole parameters, in reverse layout order, cut at
    BUCKET_BYTES): each bucket's all-reduce starts as soon as backward has produced all of its
    gradients, and buckets start strictly in their fixed order, so every element is summed at
    the same position of the same-sized bucket on every rank and in every generation."""

    def __init__(
        self,
        params: list[torch.nn.Parameter],
        world_size: int,
        slot_bytes: int,
        bucket_bytes: int = BUCKET_BYTES,
        buffers: list[torch.Tensor] = (),
    ):
        self.params = [p for p in params if p.requires_grad]
        self.buffers = [b for b in buffers if b.dtype == torch.float32]
        self.buffer_numel = sum(b.numel() for b in self.buffers)
        for p in self.params:
            if p.dtype != torch.float32:
                raise TypeError(
                    f"yoco agent reduces float32 gradients; a parameter is {p.dtype}. "
                    "Keep float32 master weights (autocast for compute is fine)."
                )
        self.device = self.params[0].device if self.params else torch.device("cpu")
        self.grad_numel = sum(p.numel() for p in self.params)
        self.offsets = []
        offset = 0
        for p in self.params:
            self.offsets.append(offset)
            offset += p.numel()
        # Buckets over whole parameters, last parameter first (backward's order, roughly).
        self.buckets: list[tuple[int, int]] = []  # (start, end) in the flat buffer
        self.bucket_of: list[int] = [0] * len(self.params)
        self.bucket_size: list[int] = []
        end = self.grad_numel
        members = 0
        for i in reversed(range(len(self.params))):
            members += 1
            self.bucket_of[i] = len(self.buckets)
            start = self.offsets[i]
            if (end - start) * 4 >= bucket_bytes or i == 0:
                self.buckets.append((start, end))
                self.bucket_size.append(members)
                end, members = start, 0
        self.group = None  # set by the runtime: the group to reduce on while backward runs
        self.abort = threading.Event()  # set by the runtime: stop waiting, the step is abandoned
        self.overlap = True
        self.pause_agreed = False
        self.world_size = 0
        self._reset_step()
        self.grads = torch.zeros(self.grad_numel, device=self.device)
        self._bind_all()
        self.configure(world_size, slot_bytes)
        for i, p in enumerate(self.params):
            p.register_post_accumulate_grad_hook(self._hook(i))

    def configure(self, world_size: int, slot_bytes: int, fresh: bool = False) -> None:
        """(Re)size the tail of pause flags and per-rank slots; the gradients stay put. `fresh`:
        a new tail even at the same size (an abandoned all-reduce may still write the old)."""
        words = _words_for(slot_bytes)
        same = world_size == self.world_size and words == getattr(self, "slot_words", None)
        if same and not fresh:
            return
        if not same:
            self.mirror = torch.zeros(world_size, words)
        self.world_size, self.slot_words = world_size, words
        n, w, b = world_size, words, self.buffer_numel
        self.tail = torch.zeros(n + b + n * w, device=self.device)
        self.flags = self.tail[:n]
        self.buffer_region = self.tail[n : n + b]
        self.slots = self.tail[n + b :].view(n, w)

    def replace_buffer(self) -> None:
        """Fresh gradient and tail buffers, gradients re-bound as views: when an abandoned
        all-reduce's threads might still write into the old ones."""
        self.grads = torch.zeros(self.grad_numel, device=self.device)
        self._bind_all()
        self.configure(self.world_size, (self.slot_words - 1) * BYTES_PER_WORD, fresh=True)
        self._reset_step()

    def _bind_all(self) -> None:
        for p, offset in zip(self.params, self.offsets, strict=True):
            p.grad = self.grads[offset : offset + p.numel()].view_as(p)

    def _view(self, i: int) -> torch.Tensor:
        p = self.params[i]
        return self.grads[self.offsets[i] : self.offsets[i] + p.numel()].view_as(p)

    def _bind(self, i: int) -> None:
        """Gradients must be views of the buffer; a user's zero_grad(set_to_none=True) or a
        freshly loaded optimizer may have replaced them."""
        p = self.params[i]
        view = self._view(i)
        if p.grad is not None and p.grad.data_ptr() != view.data_ptr():
            view.copy_(p.grad)
        p.grad = view

    def _reset_step(self) -> None:
        self._seen = [False] * len(self.params)
        self._missing = list(self.bucket_size)
        self._launched = 0
        self._works: list = []
        self._callback_queued = False
        self._reduced: bool | None = None  # the gradients' fate this step, once known

    def _hook(self, i: int):
        def hook(_param) -> None:
            if self.group is None or not self.overlap:
                return
            if self._seen[i]:
                raise AccumulationError(
                    "a gradient was accumulated twice in one step while its all-reduce may "
                    "already run: wrap all but the last backward of a step in "
                    "`with run.accumulate():`"
                )
            self._seen[i] = True
            if not self._callback_queued:
                self._callback_queued = True
                Variable._execution_engine.queue_callback(self.finish_gradients)
            self._bind(i)
            bucket = self.bucket_of[i]
            self._missing[bucket] -= 1
            self._launch_ready()

        return hook

    def _launch_ready(self) -> None:
        while self._launched < len(self.buckets) and self._missing[self._launched] == 0:
            self._launch(self._launched)

    def _launch(self, bucket: int) -> None:
        start, end = self.buckets[bucket]
        try:
            work = self.group.allreduce([self.grads[start:end]])
        except RuntimeError:  # a broken group: all_reduce reports the step as abandoned
            work = None
        self._works.append(work)
        self._launched += 1

    def pending_works(self) -> list:
        return list(self._works)

    def finish_gradients(self) -> bool:
        """Reduce the buckets backward has not started (parameters without a gradient), wait
        for every bucket and average: what DDP does when backward ends. Runs at the end of
        backward (the queued callback), else when the step ends. False when the step was
        abandoned (a peer died, or the coordinator asked us to stop waiting)."""
        if self._reduced is None:
            for i, seen in enumerate(self._seen):
                if not seen:
                    self._bind(i)
            while self._launched < len(self.buckets):
                self._launch(self._launched)
            self._reduced = all(w is not None and _wait(w, self.abort) for w in self._works)
            if self._reduced:
                self.grads.div_(self.world_size)
        return self._reduced

    def all_reduce(
        self, group, rank: int, per_rank_blob: bytes, pause: bool, abort: threading.Event
    ) -> bool:
        """End the step: the gradients (if backward did not already), then the tail (flags,
        buffers, slots). False when the step was abandoned; the gradients are then not applied
        anywhere on this rank."""
        self.group = group
        self.abort = abort
        if not self.finish_gradients():
            return False
        self.flags.zero_()
        self.flags[rank] = 1.0 if pause else 0.0
        self.buffer_region.zero_()
        if rank == 0:
            self._buffers_to_region()
        self.slots.zero_()
        self.slots[rank].copy_(encode_slot(per_rank_blob, self.slot_words))
        try:
            work = group.allreduce([self.tail])
        except RuntimeError:
            work = None
        self._works.append(work)
        if work is None or not _wait(work, abort):
            return False
        self._buffers_from_region()
        self._reset_step()
        self.mirror.copy_(self.slots)
        self.pause_agreed = bool(self.flags.sum().item() > 0)
        return True

    def _buffer_views(self):
        offset = 0
        for b in self.buffers:
            yield b, self.buffer_region[offset : offset + b.numel()].view_as(b)
            offset += b.numel()

    def _buffers_to_region(self) -> None:
        for buffer, view in self._buffer_views():
            view.copy_(buffer)

    def _buffers_from_region(self) -> None:
        with torch.no_grad():
            for buffer, view in self._buffer_views():
                buffer.copy_(view)

    def settle(self, timeout_s: float = 2.0) -> bool:
        """After an abandoned step: wait until the broken group's collectives have ended, so
        none can write into the gradient buffer any more. True when they all did."""
        deadline = time.monotonic() + timeout_s
        for work in self._works:
            while work is not None and not work.is_completed():
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.005)
        self._reset_step()
        return True

    def exchange_per_rank(self, group, rank: int, blob: bytes, abort: threading.Event) -> bool:
        """Fill the mirror right after a group forms, before the first step reduces anything."""
        slots = torch.zeros(self.world_size, self.slot_words, device=self.device)
        slots[rank].copy_(encode_slot(blob, self.slot_words))
        if not _wait(group.allreduce([slots]), abort):
            return False
        self.mirror.copy_(slots)
        return True

    def barrier(self, group, abort: threading.Event) -> bool:
        return _wait(group.allreduce([torch.zeros(1, device=self.device)]), abort)

    def broadcast_from_rank0(self, group, tensors: list[torch.Tensor], abort) -> bool:
        """Overwrite `tensors` (floating point, any dtype) with rank 0's."""
        if not tensors:
            return True
        flat = torch.cat([t.detach().reshape(-1).float() for t in tensors])
        if not _wait(group.broadcast([flat], dist.BroadcastOptions()), abort):
            return False
        offset = 0
        with torch.no_grad():
            for t in tensors:
                t.copy_(flat[offset : offset + t.numel()].view_as(t).to(t.dtype))
                offset += t.numel()
        return True

    def mirror_of(self, rank: int) -> bytes:
        return decode_slot(self.mirror[rank])

    def zero_grads(self) -> None:
        self.grads.zero_()


def _wait(work, abort: threading.Event) -> bool:
    """Wait for a collective, but give up as soon as the coordinator says a peer is gone: a
    survivor two hops from a dead rank may otherwise wait for the whole collective timeout."""
    done = threading.Event()
    work.get_future().then(lambda _: done.set())
    while not done.wait(0.05):
        if abort.is_set():
            return False
    try:
        work.wait()
    except RuntimeError:
        return False
    return True
