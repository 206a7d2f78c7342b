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

The methods below are the ones torch's C++ binding of a Python process group calls
(`PyProcessGroup`): `all_gather_single` is `_allgather_base` (`all_gather_into_tensor`),
`reduce_scatter_single` is `_reduce_scatter_base` (`reduce_scatter_tensor`), and so on.
"""

from __future__ import annotations

import datetime

import torch.distributed as dist

BACKEND = "yoco"


class GroupNotFormed(RuntimeError):
    pass


class ReformableGroup(dist.ProcessGroup):
    """A process group of fixed rank and size whose gloo group underneath can be replaced."""

    def __init__(self, rank: int, size: int, timeout: datetime.timedelta):
        super().__init__(rank, size)
        self._rank, self._size, self._timeout = rank, size, timeout
        self._name: str | None = None
        self._inner: dist.ProcessGroup | None = None

    def form(self, store: dist.Store) -> None:
        """Replace the gloo group underneath by one rendezvousing on `store` (a fresh prefix)."""
        self._inner = dist.ProcessGroupGloo(store, self._rank, self._size, self._timeout)

    def abort(self) -> None:
        """Unblock whatever waits on the current gloo group (a peer died)."""
        if self._inner is not None:
            try:
                self._inner.abort()
            except RuntimeError:
                pass

    @property
    def inner(self) -> dist.ProcessGroup:
        if self._inner is None:
            raise GroupNotFormed(
                f"process group {self._name} is not formed yet: collectives start with the "
                "first step of run.steps()"
            )
        return self._inner

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
        return self.inner.allreduce(tensors, opts)

    def allreduce_coalesced(self, tensors, opts):
        return self.inner.allreduce_coalesced(tensors, opts)

    def allgather(self, outputs, inputs, opts):
        return self.inner.allgather(outputs, inputs, opts)

    def all_gather_single(self, output, input, opts):
        return self.inner._allgather_base(output, input, opts)

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts):
        return self.inner.allgather_into_tensor_coalesced(outputs, inputs, opts)

    def all_gather_single_coalesced(self, outputs, inputs, opts):
        return self.inner.allgather_into_tensor_coalesced(outputs, inputs, opts)

    def reduce_scatter(self, outputs, inputs, opts):
        return self.inner.reduce_scatter(outputs, inputs, opts)

    def reduce_scatter_single(self, output, input, opts):
        return self.inner._reduce_scatter_base(output, input, opts)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts):
        return self.inner.reduce_scatter_tensor_coalesced(outputs, inputs, opts)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts):
        return self.inner.reduce_scatter_tensor_coalesced(outputs, inputs, opts)

    def broadcast(self, tensors, opts):
        return self.inner.broadcast(tensors, opts)

    def barrier(self, opts):
        return self.inner.barrier(opts)

    def all_to_all_single(self, output, input, output_splits, input_splits, opts):
        return self.inner.alltoall_base(output, input, output_splits, input_splits, opts)

    def send(self, tensors, dst, tag):
        return self.inner.send(tensors, dst, tag)

    def recv(self, tensors, src, tag):
        return self.inner.recv(tensors, src, tag)


class GroupLayer:
    """Every ReformableGroup of this process, in the order torch created them."""

    def __init__(self, store: dist.Store, timeout: datetime.timedelta):
        self.store = store
        self.timeout = timeout
        self.groups: list[ReformableGroup] = []

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
        group = ReformableGroup(rank, size, self.timeout)
        self.groups.append(group)
        return group

    def form(self, generation: int) -> None:
        """Every group anew for this generation; all members of the job call it together."""
        for group in self.groups:
            group.form(dist.PrefixStore(f"pg/{generation}/mesh/{group.group_name}/", self.store))

    def abort(self) -> None:
        for group in self.groups:
            group.abort()
