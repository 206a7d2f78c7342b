"""Process groups that survive a member being replaced, so that a script's `DeviceMesh`, FSDP2
(`fully_shard`) and DTensor keep working after a spare takes a rank.

torch binds a DeviceMesh, FSDP2's parameter groups and every DTensor to process group *objects*
(and to the names c10d registered them under). A gloo group cannot take a new member: once a rank
is replaced, every group it was in is dead. So each group of the script's mesh is a
`ReformableGroup`, a `ProcessGroup` subclass created by torch itself (`init_process_group` and
DeviceMesh's `new_group` calls, through the backend registered here as "yoco"), which hands each
collective to an ordinary gloo group it holds. `GroupLayer.form(generation)` replaces that inner
group, in every process at once, by one formed on the job's store under
`pg/{generation}/mesh/{group name}/` at the same rank and size; the objects torch holds never
change, so neither does anything built on them. The world size, the mesh shape and every rank's
place in it stay fixed: a spare takes exactly the rank it replaces.

This follows torchft's reconfigurable groups (`torchft/process_group.py`: `ProcessGroupWrapper`,
`ProcessGroupGloo`) without depending on torchft: its gloo wrapper refuses reduce-scatter, which
FSDP2 reduces gradients with; it rendezvouses through a TCPStore hosted by each group, where the
agent already has one store and a generation counter; and it registers a one-rank group for
DeviceMesh ("resizable worlds don't fit DeviceMesh"), so a mesh over it covers the replica
dimension only, where here every dimension is re-formed.

A collective that fails (a peer died, or the group was aborted because one did) does not raise
into the script: FSDP2 and DTensor would raise out of its forward or backward, where no one can
catch it. Like torchft's `ErrorSwallowingProcessGroupWrapper`, the group completes the work
without its result, the tensors hold whatever they hold, and the layer remembers it
(`GroupLayer.failed`): `Run.step()` then abandons the step, as it does when its own all-reduce
fails, and the step is redone once the groups are re-formed.

The methods below are the ones torch's C++ binding of a Python process group calls
(`PyProcessGroup`): `all_gather_single` is `_allgather_base` (`all_gather_into_tensor`),
`reduce_scatter_single` is `_reduce_scatter_base` (`reduce_scatter_tensor`), and so on.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable

import torch
import torch.distributed as dist

BACKEND = "yoco"


class GroupNotFormed(RuntimeError):
    pass


class _CompletedWork(dist.Work):
    """A collective's work that always completes: a failure is reported to `on_error`. Waiting
    gives up once `aborted` is set: gloo's abort() does not end a wait, and a survivor whose
    ring neighbour gave up would otherwise wait for the whole collective timeout."""

    def __init__(
        self, work: dist.Work | None, on_error: Callable[[], None], aborted: threading.Event
    ):
        super().__init__()
        self._work = work
        self._on_error = on_error
        self._aborted = aborted

    def wait(self, timeout=None) -> bool:
        if self._work is None:
            return True
        done = threading.Event()
        failed: list[bool] = []

        def settle(future: torch.futures.Future | None = None) -> None:
            try:
                future.value() if future is not None else self._work.wait()
            except RuntimeError:
                failed.append(True)
            done.set()

        try:
            self._work.get_future().add_done_callback(settle)
        except RuntimeError:  # no future (gloo's reduce-scatter, send, receive): a thread waits
            threading.Thread(target=settle, daemon=True, name="yoco-collective").start()
        while not done.wait(0.01):
            if self._aborted.is_set():
                self._on_error()
                return True
        if failed:
            self._on_error()
        return True

    def get_future(self) -> torch.futures.Future:
        future: torch.futures.Future = torch.futures.Future()
        if self._work is None:
            future.set_result(None)
            return future

        def settle(inner: torch.futures.Future) -> None:
            try:
                inner.value()
            except RuntimeError:
                self._on_error()
            future.set_result(None)

        self._work.get_future().add_done_callback(settle)
        return future


class ReformableGroup(dist.ProcessGroup):
    """A process group of fixed rank and size whose gloo group underneath can be replaced."""

    def __init__(
        self,
        rank: int,
        size: int,
        timeout: datetime.timedelta,
        on_error: Callable[[], None],
        aborted: threading.Event,
    ):
        super().__init__(rank, size)
        self._rank, self._size, self._timeout = rank, size, timeout
        self._on_error = on_error
        self._aborted = aborted
        self._name: str | None = None
        self._inner: dist.ProcessGroup | None = None
        # Groups replaced while a collective given up on may still run in their threads: kept,
        # as destroying a gloo group joins those threads (up to the collective timeout).
        self._replaced: list[dist.ProcessGroup] = []

    def form(self, store: dist.Store) -> None:
        """Replace the gloo group underneath by one rendezvousing on `store` (a fresh prefix)."""
        if self._inner is not None:
            self._replaced.append(self._inner)
        self._inner = dist.ProcessGroupGloo(store, self._rank, self._size, self._timeout)

    def _run(self, collective: Callable[[dist.ProcessGroup], dist.Work]) -> dist.Work:
        if self._inner is None:
            raise GroupNotFormed(
                f"process group {self._name} is not formed yet: collectives start with the "
                "first step of run.steps()"
            )
        try:
            work = collective(self._inner)
        except RuntimeError:  # an aborted group refuses new work
            self._on_error()
            work = None
        return _CompletedWork(work, self._on_error, self._aborted)

    # What c10d and DeviceMesh ask of any group.
    def size(self) -> int:
        return self._size

    def getBackendName(self) -> str:
        return BACKEND

    def _set_group_name(self, name: str) -> None:
        self._name = name

    @property
    def group_name(self) -> str:
        return self._name

    # The collectives, handed to the current gloo group.
    def allreduce(self, tensors, opts):
        return self._run(lambda g: g.allreduce(tensors, opts))

    def allreduce_coalesced(self, tensors, opts):
        return self._run(lambda g: g.allreduce_coalesced(tensors, opts))

    def allgather(self, outputs, inputs, opts):
        return self._run(lambda g: g.allgather(outputs, inputs, opts))

    def all_gather_single(self, output, input, opts):
        return self._run(lambda g: g._allgather_base(output, input, opts))

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts):
        return self._run(lambda g: g.allgather_into_tensor_coalesced(outputs, inputs, opts))

    def all_gather_single_coalesced(self, outputs, inputs, opts):
        return self._run(lambda g: g.allgather_into_tensor_coalesced(outputs, inputs, opts))

    def reduce_scatter(self, outputs, inputs, opts):
        return self._run(lambda g: g.reduce_scatter(outputs, inputs, opts))

    def reduce_scatter_single(self, output, input, opts):
        return self._run(lambda g: g._reduce_scatter_base(output, input, opts))

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts):
        return self._run(lambda g: g.reduce_scatter_tensor_coalesced(outputs, inputs, opts))

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts):
        return self._run(lambda g: g.reduce_scatter_tensor_coalesced(outputs, inputs, opts))

    def broadcast(self, tensors, opts):
        return self._run(lambda g: g.broadcast(tensors, opts))

    def barrier(self, opts):
        return self._run(lambda g: g.barrier(opts))

    def all_to_all_single(self, output, input, output_splits, input_splits, opts):
        return self._run(
            lambda g: g.alltoall_base(output, input, output_splits, input_splits, opts)
        )

    def send(self, tensors, dst, tag):
        return self._run(lambda g: g.send(tensors, dst, tag))

    def recv(self, tensors, src, tag):
        return self._run(lambda g: g.recv(tensors, src, tag))


class GroupLayer:
    """Every ReformableGroup of this process, in the order torch created them."""

    def __init__(self, store: dist.Store, timeout: datetime.timedelta):
        self.store = store
        self.timeout = timeout
        self.groups: list[ReformableGroup] = []
        self.failed = False  # a collective failed since the groups were last formed
        self.aborted = threading.Event()  # a peer died: stop waiting on any collective

    def init_world(self, rank: int, world_size: int) -> None:
        """torch's default group, the first ReformableGroup: DeviceMesh reads this process's
        rank from it and creates the mesh's other groups (`new_group`) with its backend. The
        store passed here is only c10d's; the groups rendezvous in `form`."""
        dist.Backend.register_backend(BACKEND, self._create, devices=["cpu", "cuda"])
        dist.init_process_group(
            BACKEND,
            store=dist.PrefixStore("pg/c10d/", self.store),
            rank=rank,
            world_size=world_size,
            timeout=self.timeout,
        )

    def _create(self, _store, rank: int, size: int, _timeout) -> ReformableGroup:
        group = ReformableGroup(rank, size, self.timeout, self._failed, self.aborted)
        self.groups.append(group)
        return group

    def _failed(self) -> None:
        self.failed = True

    def form(self, generation: int) -> None:
        """Every group anew for this generation; all members of the job call it together."""
        self.failed = False
        self.aborted.clear()
        for group in self.groups:
            group.form(dist.PrefixStore(f"pg/{generation}/mesh/{group.group_name}/", self.store))

    def abort(self) -> None:
        """A peer died: every collective in flight or to come gives up until `form`."""
        self.aborted.set()
