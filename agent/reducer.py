"""Deterministic data-parallel gradient reduction, with the per-rank state mirror riding along.

Why not DDP: DDP rebuilds its buckets after the first iteration of every new instance, and gloo's
ring sums an element in an order that depends on where it sits in its bucket. A spare that
joins mid-run would therefore reduce in a different order than the rank it replaces, and the
run would stop being bit-for-bit reproducible. Here every rank, old or new, reduces one flat
buffer whose layout is fixed by parameter registration order, so every element is summed in
the same order in every generation of the process group.

The buffer holds three regions:

    [ gradients (P) | pause flags (N) | per-rank state slots (N x W) ]

Each rank writes its own pause flag and its own per-rank state (RNG, data position) into its
own slot and zeros into the others; the SUM all-reduce is then an all-gather of those for free
(x + 0 == x exactly, and slot words are integers below 2**24, exact in float32). After a
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
    ):
        self.params = [p for p in params if p.requires_grad]
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
        n, w = world_size, words
        self.tail = torch.zeros(n + n * w, device=self.device)
        self.flags = self.tail[:n]
        self.slots = self.tail[n:].view(n, w)

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

    def all_reduce(
        self, group, rank: int, per_rank_blob: bytes, pause: bool, abort: threading.Event
    ) -> bool:
        """Reduce this step's gradients (the buckets backward has not started yet, then the
        flags and slots). False when the step was abandoned (a peer died, or the coordinator
        asked us to stop waiting); the gradients are then not applied anywhere on this rank."""
        self.group = group
        for i, seen in enumerate(self._seen):
            if not seen:
                self._bind(i)
        while self._launched < len(self.buckets):
            self._launch(self._launched)
        self.flags.zero_()
        self.flags[rank] = 1.0 if pause else 0.0
        self.slots.zero_()
        self.slots[rank].copy_(encode_slot(per_rank_blob, self.slot_words))
        try:
            self._works.append(group.allreduce([self.tail]))
        except RuntimeError:
            self._works.append(None)
        works, self._works = self._works, []
        for work in works:
            if work is None or not _wait(work, abort):
                self._works = works
                return False
        self._reset_step()
        self.grads.div_(self.world_size)
        self.mirror.copy_(self.slots)
        self.pause_agreed = bool(self.flags.sum().item() > 0)
        return True

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
