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


class FlatReducer:
    def __init__(self, params: list[torch.nn.Parameter], world_size: int, slot_bytes: int):
        self.params = [p for p in params if p.requires_grad]
        for p in self.params:
            if p.dtype != torch.float32:
                raise TypeError(
                    f"yoco agent reduces float32 gradients; a parameter is {p.dtype}. "
                    "Keep float32 master weights (autocast for compute is fine)."
                )
        self.device = self.params[0].device if self.params else torch.device("cpu")
        self.grad_numel = sum(p.numel() for p in self.params)
        self.world_size = world_size
        self.slot_words = _words_for(slot_bytes)
        self.mirror = torch.zeros(world_size, self.slot_words)
        self.pause_agreed = False
        self.replace_buffer()

    def replace_buffer(self) -> None:
        """A fresh buffer, gradients re-bound as views of it. Called after an abandoned
        all-reduce too: the dead group's threads may still write into the old buffer."""
        n, w = self.world_size, self.slot_words
        self.buffer = torch.zeros(self.grad_numel + n + n * w, device=self.device)
        self.grads = self.buffer[: self.grad_numel]
        self.flags = self.buffer[self.grad_numel : self.grad_numel + n]
        self.slots = self.buffer[self.grad_numel + n :].view(n, w)
        offset = 0
        for p in self.params:
            p.grad = self.grads[offset : offset + p.numel()].view_as(p)
            offset += p.numel()

    def _rebind(self) -> None:
        """Gradients must be views of the buffer; a user's zero_grad(set_to_none=True) or a
        freshly loaded optimizer may have replaced them."""
        offset = 0
        for p in self.params:
            view = self.grads[offset : offset + p.numel()].view_as(p)
            if p.grad is not None and p.grad.data_ptr() != view.data_ptr():
                view.copy_(p.grad)
            p.grad = view
            offset += p.numel()

    def all_reduce(
        self, group, rank: int, per_rank_blob: bytes, pause: bool, abort: threading.Event
    ) -> bool:
        """Reduce this step's gradients. False when the step was abandoned (a peer died, or the
        coordinator asked us to stop waiting); the gradients are then not applied anywhere
        on this rank."""
        self._rebind()
        self.flags.zero_()
        self.flags[rank] = 1.0 if pause else 0.0
        self.slots.zero_()
        self.slots[rank].copy_(encode_slot(per_rank_blob, self.slot_words))
        if not _wait(group.allreduce([self.buffer]), abort):
            return False
        self.grads.div_(self.world_size)
        self.mirror.copy_(self.slots)
        self.pause_agreed = bool(self.flags.sum().item() > 0)
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
