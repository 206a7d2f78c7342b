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
parameter shard of P bytes instead of 3P, and the buddy keeps at most 3P + `every` x P. The cost
paid for it is the replay on the spare, at most `every` optimizer steps, after a failure only.
"""

from __future__ import annotations

import math
import threading

import torch
import torch.distributed as dist

from agent.skeleton import encode, tensor_specs, unflatten
from agent.state import as_bytes

SNAPSHOT_EVERY = 8
_TAG = 1 << 20  # clear of the tags other traffic on the training group uses


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


def _send_tree(group: dist.ProcessGroup, dst: int, tree) -> tuple[list, int]:
    """Post a state tree's sends (length, skeleton, every tensor's bytes in one buffer, each
    starting at a multiple of 8 bytes so the receiver's views of it are aligned); the works and
    the tensors' bytes."""
    encoded = encode(tree)
    skeleton = torch.frombuffer(bytearray(encoded.skeleton), dtype=torch.uint8)
    payload = []
    for tensor in encoded.tensors:
        raw = as_bytes(tensor)
        payload += [raw, torch.zeros(_padding(raw.numel()), dtype=torch.uint8)]
    flat = torch.cat(payload) if payload else torch.empty(0, dtype=torch.uint8)
    header = torch.tensor([skeleton.numel(), flat.numel()], dtype=torch.int64)
    works = [group.send([header], dst, _TAG), group.send([skeleton], dst, _TAG + 1)]
    if flat.numel():
        works.append(group.send([flat], dst, _TAG + 2))
    return works, flat.numel()


def _recv_tree(group: dist.ProcessGroup, src: int):
    header = torch.zeros(2, dtype=torch.int64)
    group.recv([header], src, _TAG).wait()
    skeleton = torch.empty(int(header[0]), dtype=torch.uint8)
    group.recv([skeleton], src, _TAG + 1).wait()
    flat = torch.empty(int(header[1]), dtype=torch.uint8)
    if flat.numel():
        group.recv([flat], src, _TAG + 2).wait()
    raw = skeleton.numpy().tobytes()
    tensors, offset = [], 0
    for spec in tensor_specs(raw):
        size = torch.empty(0, dtype=spec.dtype).element_size() * math.prod(spec.shape)
        tensors.append(flat[offset : offset + size].view(spec.dtype).reshape(spec.shape))
        offset += size + _padding(size)
    return unflatten(raw, tensors)


def _padding(nbytes: int) -> int:
    return -nbytes % 8


def _swap(
    group: dist.ProcessGroup, rank: int, world_size: int, shift: int, record, abort: threading.Event
):
    """Send `record` to rank + shift and receive rank - shift's; (received, bytes sent). Gloo's
    sends and receives have no future and no completion flag before `wait()`, so a thread waits
    on them while this one watches `abort` (the group is aborted when a step is abandoned, which
    ends that thread's wait)."""
    result: dict = {}

    def swap() -> None:
        sends: list = []
        try:
            sends, result["bytes"] = _send_tree(group, (rank + shift) % world_size, record)
            result["received"] = _recv_tree(group, (rank - shift) % world_size)
        except RuntimeError as error:
            result["error"] = error
        finally:
            # Gloo reads a send's tensor until the send ends, and the work holds the only
            # reference to it: dropping the works early (the receive from a dead neighbour
            # failed) freed a buffer gloo was still writing from, which killed the process.
            for work in sends:
                try:
                    work.wait()
                except RuntimeError as error:
                    result.setdefault("error", error)

    thread = threading.Thread(target=swap, daemon=True, name="yoco-mirror")
    thread.start()
    while thread.is_alive():
        thread.join(0.01)
        if abort.is_set():
            raise MirrorBroken("the step was abandoned")
    if "error" in result:
        raise MirrorBroken(str(result["error"])) from result["error"]
    return result["received"], result["bytes"]


class ShardMirror:
    """This rank's record to its buddy each step, and its copy of the shard of the rank it is
    the buddy of (rank r - shift)."""

    def __init__(self, every: int = SNAPSHOT_EVERY):
        self.every = every
        self.shift = 1  # buddy_shift of the current group, set with each re-form
        self.snapshot: dict | None = None  # rank r - shift's state at the start of step S
        self.grads: list = []  # its gradient shards of steps S, S+1, ...
        self._pending: tuple[dict | None, list] | None = None
        self._snapshot_due = True
        self.bytes_sent = 0  # of the last record (bench)

    def reset(self, shift: int) -> None:
        """After the groups re-formed: the next record is a snapshot (a new process may now be
        either neighbour, and a spare on another node may have changed the buddies)."""
        self.shift = shift
        self.snapshot, self.grads, self._pending = None, [], None
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
            received, self.bytes_sent = _swap(group, rank, world_size, self.shift, record, abort)
        except MirrorBroken:
            self._pending = None
            return False
        self._pending = (received["snapshot"], received["grads"])
        return True

    def commit(self) -> None:
        """The step completed everywhere: its record counts."""
        if self._pending is None:
            return
        snapshot, grads = self._pending
        self._pending = None
        if snapshot is not None:
            self.snapshot, self.grads = snapshot, []
        self.grads.append(grads)
        self._snapshot_due = False

    def drop(self) -> None:
        """The step was abandoned: its record does not count."""
        self._pending = None

    def copy_held(self) -> dict:
        """What a spare taking rank r - shift over needs: the snapshot and the gradients since."""
        if self.snapshot is None:
            raise MirrorBroken("no snapshot of the neighbour's shard yet")
        return {"snapshot": self.snapshot, "grads": self.grads}
