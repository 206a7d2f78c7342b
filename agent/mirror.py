"""The shard mirror: a live copy of a sharded rank's state in its buddy's host memory, so an
unplanned death loses nothing even though no other rank holds that shard
(`state_source: mirror`).

The buddy of rank r is rank r + k (mod the world size), k the same for every rank and chosen by
`buddy_shift` so that a buddy is on another node than its rank wherever the layout allows: a
node lost whole then takes no rank's only copy with it (k = 1 when all ranks share a node).
Each step, inside `Run.step()` after clipping and before the update, every rank sends its buddy
one record, and receives one from rank r - k:

* every `every` steps, and at the first step after the groups re-formed, a *snapshot*: the
  rank's shards of parameters, optimizer and scheduler state as of the start of the step
  (`Registry.transfer_state`);
* every step, the gradient shards the optimizer is about to apply (after clipping).

A record counts once the step completes (the step's all-reduce went through everywhere); an
abandoned step's record is dropped. So the buddy always holds a snapshot of step S and the
gradients of steps S .. R-1, R being the first step not completed. A spare taking rank r over
receives them and replays the updates: `optimizer.step()` and the schedulers on the recorded
gradients, never a forward or backward, which reproduces the lost rank's shards bit for bit
(the same update on the same numbers). The per-rank state (RNG, data position) comes from the
all-reduce's per-rank mirror, as for replicated jobs.

Why gradients and not the state each step: a step's gradient shard is a third of what AdamW's
shard holds (parameters, two moments), so the mirror moves P + 3P/`every` bytes per step for a
parameter shard of P bytes instead of 3P, and the buddy holds at most 3P + `every` x P of
records. The cost paid for it is the replay on the spare, at most `every` optimizer steps, after
a failure only. How records travel, and the memory that takes (two cycles of records in shared
memory on one host, about twice what the buddy holds), is agent/mirror_link.py's.
"""

from __future__ import annotations

import threading

import torch
import torch.distributed as dist

from agent.mirror_link import BufferPool, Link, LinkBroken, swap

SNAPSHOT_EVERY = 8


def buddy_shift(nodes: list[str]) -> int:
    """The k of "rank r's buddy is rank r + k", `nodes[r]` being rank r's node: the k that puts
    the most buddies on another node than their rank, the smallest such k on a tie (1 when all
    ranks share a node). One k for all ranks keeps the buddies a permutation: every rank sends
    one record and keeps one copy."""
    n = len(nodes)

    def across(k: int) -> int:
        return sum(nodes[r] != nodes[(r + k) % n] for r in range(n))

    return max(range(1, n), key=lambda k: (across(k), -k), default=1)


class MirrorBroken(RuntimeError):
    pass


class ShardMirror:
    """This rank's record to its buddy each step, and its copy of the shard of the rank it is
    the buddy of (rank r - shift)."""

    def __init__(self, every: int = SNAPSHOT_EVERY, shared_memory: bool = True):
        self.every = every
        self.shift = 1  # buddy_shift of the current group, set with each re-form
        self.snapshot: dict | None = None  # rank r - shift's state at the start of step S
        self.grads: list = []  # its gradient shards of steps S, S+1, ...
        self._held: list[torch.Tensor] = []  # the pool buffers they lie in (over gloo)
        self._pending: tuple[dict | None, list, torch.Tensor | None] | None = None
        # How records travel (agent/mirror_link.py); shared_memory=False: always over gloo.
        self._shared_memory = shared_memory
        self._buffers = BufferPool(keep=every + 4)
        self._link = self._new_link()
        self._snapshot_due = True
        self.bytes_sent = 0  # of the last record (bench)

    def _new_link(self) -> Link:
        return Link(self._buffers, self._shared_memory, records_per_cycle=self.every + 1)

    @property
    def transport(self) -> str:
        return self._link.transport

    def reset(self, shift: int) -> None:
        """After the groups re-formed: the next record is a snapshot (a new process may now be
        either neighbour, and a spare on another node may have changed the buddies)."""
        self.shift = shift
        self._link.close()
        self._link = self._new_link()
        # Not given to the pool: a cancelled transfer of the copy to a spare may still read it.
        self.snapshot, self.grads, self._held, self._pending = None, [], [], None
        self._snapshot_due = True

    def exchange(
        self,
        group: dist.ProcessGroup,
        rank: int,
        world_size: int,
        step: int,
        state,
        grads: list[torch.Tensor],
        abort: threading.Event,
    ) -> bool:
        """Send this step's record to the buddy and take rank - shift's; `state()` gives this
        rank's shards when a snapshot is due. False when the exchange failed."""
        due = self._snapshot_due or step % self.every == 0
        record = {"snapshot": state() if due else None, "grads": grads}
        try:
            received, buffer, self.bytes_sent = swap(
                group, rank, world_size, self.shift, record, due, abort, self._link
            )
        except LinkBroken:
            self._pending = None  # the exchange's thread may still be writing its buffer
            return False
        self._pending = (received["snapshot"], received["grads"], buffer)
        return True

    def commit(self) -> None:
        """The step completed everywhere: its record counts."""
        if self._pending is None:
            return
        snapshot, grads, buffer = self._pending
        self._pending = None
        if snapshot is not None:
            self._buffers.give(self._held)
            self.snapshot, self.grads, self._held = snapshot, [], []
        self.grads.append(grads)
        if buffer is not None:  # else it lies in the sender's shared memory
            self._held.append(buffer)
        self._snapshot_due = False

    def drop(self) -> None:
        """The step was abandoned: its record, and the one this rank sent, do not count."""
        if self._pending is not None and self._pending[2] is not None:
            self._buffers.give([self._pending[2]])
        self._pending = None
        self._link.undo()

    def copy_held(self) -> dict:
        """What a spare taking rank r - shift over needs: the snapshot and the gradients since."""
        if self.snapshot is None:
            raise MirrorBroken("no snapshot of the neighbour's shard yet")
        return {"snapshot": self.snapshot, "grads": self.grads}
