"""How a shard mirror's record reaches the buddy (agent/mirror.py): one exchange per step, in
which every rank sends its record to rank + shift and receives rank - shift's.

The record's skeleton always goes over the training group (gloo). Its tensors' bytes go:

* through shared memory when the buddy is on the same host: the sender copies them into a memfd
  of its own, which the buddy maps through `/proc/<pid>/fd/<fd>` and keeps the record in as it
  lies, no copy made (a loopback TCP stream and the buddy's copy had cost more than the rest of
  the mirror together). The memory outlives the sender as any copy would. Records are placed so
  that none the buddy still holds is ever written again: the records of one snapshot cycle (a
  snapshot and the gradients after it, which the buddy lets go together when the next snapshot
  counts) fill one of two arenas, and the next cycle fills the other. A buddy answers the first
  record in each memfd (mapped, or not mappable: another PID namespace, /proc hidden), and the
  sender falls back to gloo for that buddy if it could not map it;
* over gloo otherwise, in one message (a message per tensor cost a round trip each), from and
  into buffers of a `BufferPool`, used again once let go (a fresh buffer per step cost a page
  fault per 4 KiB as it filled).
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import threading

import torch
import torch.distributed as dist

from agent.devices import host_identity
from agent.skeleton import encode, tensor_specs, unflatten
from agent.state import as_bytes

_TAG = 1 << 20  # clear of the tags other traffic on the training group uses
_HEADER, _SKELETON, _BYTES, _ANSWER = range(_TAG, _TAG + 4)
_TOKEN_BYTES = 64  # a memfd's first bytes: its token (a word); records follow, aligned
_MEMFD_NAME = "yoco-mirror"


class LinkBroken(RuntimeError):
    pass


class BufferPool:
    """The buffers records are sent from and received into, used again once let go (a received
    record is kept for up to `every` steps, so the allocator's own reuse rarely applied). A
    buffer is given back only when nothing can still write or read it: never one an abandoned
    exchange's thread may be using."""

    def __init__(self, keep: int):
        self.keep = keep
        self._free: list[torch.Tensor] = []
        self._lock = threading.Lock()  # an abandoned exchange's thread may still be taking

    def take(self, nbytes: int) -> torch.Tensor:
        with self._lock:
            for i, buffer in enumerate(self._free):
                if buffer.numel() == nbytes:
                    return self._free.pop(i)
        return torch.empty(nbytes, dtype=torch.uint8)

    def give(self, buffers: list[torch.Tensor]) -> None:
        """Buffers nothing refers to any more; the newest `keep` are kept."""
        with self._lock:
            self._free = (self._free + buffers)[-self.keep :]


@functools.cache
def _host() -> int:
    """This host and PID namespace, as one number: a buddy with the same one can open this
    process's /proc/<pid>/fd (devices.host_identity names the running machine, shared by its
    containers; the namespace's inode tells containers apart). 0 where /proc does not say."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0
    digest = hashlib.blake2b(f"{host_identity()}/{namespace}".encode(), digest_size=7).digest()
    return int.from_bytes(digest, "little")


class _Memfd:
    """One memfd and this process's mapping of it. Its first word is a token of its own: the
    reader's name for it (a new memfd may get a closed one's fd number, and its size)."""

    def __init__(self, capacity: int):
        self.token = int.from_bytes(os.urandom(7), "little")
        self.fd = os.memfd_create(_MEMFD_NAME, os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, capacity)
            # Reserved up front: a mapping the kernel cannot back would kill the process.
            os.posix_fallocate(self.fd, 0, capacity)
            self.memory = torch.from_file(
                f"/proc/self/fd/{self.fd}", True, capacity, dtype=torch.uint8
            )
        except (OSError, RuntimeError):
            os.close(self.fd)
            raise
        self.memory[:8].view(torch.int64)[0] = self.token
        self.capacity = capacity

    def close(self) -> None:
        os.close(self.fd)  # a buddy's mapping of it stays valid


class SharedOut:
    """Where this rank places its records for a buddy on the same host: two arenas (memfds),
    one per snapshot cycle in turn, each filled from the start."""

    def __init__(self, wanted: bool, records_per_cycle: int):
        self.host = _host() if wanted and hasattr(os, "memfd_create") else 0
        self.usable = self.host != 0
        self.records_per_cycle = records_per_cycle
        self._arenas: list[_Memfd | None] = [None, None]
        self._cycle, self._used = 0, _TOKEN_BYTES
        self._before_last: tuple[int, int] | None = None  # (cycle, used) before the last place()
        self._grads_bytes = 0  # the last record's size that started no cycle
        self.confirmed: set[int] = set()  # the tokens of the memfds the buddy has mapped

    def place(self, nbytes: int, starts_cycle: bool) -> tuple[torch.Tensor, list[int]] | None:
        """Room for a record of `nbytes` that overlaps none the buddy may still hold, and its
        address; None when no shared memory can be had."""
        self._before_last = (self._cycle, self._used)
        if starts_cycle:  # the other arena's cycle was let go when this one's snapshot counted
            self._cycle, self._used = self._cycle ^ 1, _TOKEN_BYTES
            # The whole cycle: this snapshot and the gradient records after it, at the last
            # size seen (sizes settle after the first cycles: optimizer state appears lazily).
            room = nbytes + 64 + (self.records_per_cycle - 1) * (self._grads_bytes + 64)
        else:
            self._grads_bytes = nbytes
            room = self.records_per_cycle * (nbytes + 64)  # at most the rest of the cycle
        arena = self._arenas[self._cycle]
        start = self._used + -self._used % 64
        too_small = arena is None or start + nbytes > arena.capacity
        if too_small or (starts_cycle and arena.capacity < _TOKEN_BYTES + room):
            # A new memfd; the records of this cycle already in the old one stay there (the
            # buddy's mapping keeps it).
            try:
                fresh = _Memfd(_TOKEN_BYTES + room)
            except (OSError, RuntimeError):
                self.usable = False
                return None
            if arena is not None:
                arena.close()
            self._arenas[self._cycle] = arena = fresh
            start = _TOKEN_BYTES
        self._used = start + nbytes
        address = [self.host, os.getpid(), arena.fd, arena.capacity, arena.token, start]
        return arena.memory[start : start + nbytes], address

    def undo(self) -> None:
        """The last record placed does not count (its step was abandoned): its room is free."""
        if self._before_last is not None:
            self._cycle, self._used = self._before_last
            self._before_last = None

    def close(self) -> None:
        for arena in self._arenas:
            if arena is not None:
                arena.close()
        self._arenas = [None, None]


class SharedIn:
    """This rank's mappings of the sending neighbour's memfds."""

    def __init__(self):
        self._mapped: dict[tuple, torch.Tensor] = {}

    def view(self, address: list[int], nbytes: int) -> torch.Tensor | None:
        """The record at `address`, in place; None when it cannot be mapped here."""
        host, pid, fd, capacity, token, start = address
        key = (pid, fd, capacity, token)
        if key not in self._mapped:
            if host == 0 or host != _host():
                return None
            path = f"/proc/{pid}/fd/{fd}"
            try:
                # Only a mirror memfd is mapped (never a file a reused pid left open there).
                if not os.readlink(path).startswith(f"/memfd:{_MEMFD_NAME}"):
                    return None
                memory = torch.from_file(path, True, capacity, dtype=torch.uint8)
            except (OSError, RuntimeError):
                return None
            if int(memory[:8].view(torch.int64)[0]) != token:
                return None
            # The records held keep their own mappings alive; only recent memfds stay here.
            self._mapped = {**dict(list(self._mapped.items())[-3:]), key: memory}
        return self._mapped[key][start : start + nbytes]


class Link:
    """One rank's ends of the exchange for one generation of the groups: its arenas for its
    buddy, its mappings of its sending neighbour's, and the pool of buffers (which outlives
    it). A new generation gets a new Link: an abandoned exchange's thread may use the old."""

    def __init__(self, buffers: BufferPool, shared_memory: bool, records_per_cycle: int):
        self.buffers = buffers
        self.shared_out = SharedOut(shared_memory, records_per_cycle)
        self.shared_in = SharedIn()

    @property
    def transport(self) -> str:
        """How this rank's records go to its buddy: "shared memory" unless the buddy could not
        map it, then "gloo"."""
        return "shared memory" if self.shared_out.usable else "gloo"

    def undo(self) -> None:
        self.shared_out.undo()

    def close(self) -> None:
        self.shared_out.close()
        self.shared_in = SharedIn()


def _layout(tree) -> tuple[bytes, list[torch.Tensor], int]:
    """A tree's skeleton, its tensors' bytes (each padded to a multiple of 8, so the receiver's
    views of them are aligned) and their total size."""
    encoded = encode(tree)
    parts = []
    for tensor in encoded.tensors:
        raw = as_bytes(tensor)
        parts += [raw, torch.zeros(_padding(raw.numel()), dtype=torch.uint8)]
    return encoded.skeleton, parts, sum(part.numel() for part in parts)


def _padding(nbytes: int) -> int:
    return -nbytes % 8


def _unpack(skeleton: bytes, flat: torch.Tensor):
    tensors, offset = [], 0
    for spec in tensor_specs(skeleton):
        size = spec.dtype.itemsize * math.prod(spec.shape)
        tensors.append(flat[offset : offset + size].view(spec.dtype).reshape(spec.shape))
        offset += size + _padding(size)
    return unflatten(skeleton, tensors)


def _wait_all(works: list) -> bool:
    """Wait for every work, even after one failed (gloo reads and writes a work's tensor until
    it ends: dropping works early once freed a buffer gloo was still writing from, and killed
    the process); whether all ended well."""
    ended = True
    for work in works:
        try:
            work.wait()
        except RuntimeError:
            ended = False
    return ended


def _exchange(group, dst, src, record, starts_cycle: bool, link: Link, result: dict) -> None:
    """Send `record` to `dst` and receive `src`'s into result["received"]: (the tree, the pool
    buffer it lies in, or None when it lies in the sender's memory). The order keeps a ring of
    ranks doing this at once free of waits on each other: every rank posts its sends before it
    blocks on a receive, and answers its sender before it waits for its own buddy's answer."""
    sends: list = []
    receiving: list = []
    sent: torch.Tensor | None = None  # a pool buffer sent over gloo
    try:
        skeleton, parts, nbytes = _layout(record)
        placed = link.shared_out.place(nbytes, starts_cycle) if link.shared_out.usable else None
        if placed is not None:
            flat, address = placed
            ask = address[4] not in link.shared_out.confirmed
        else:
            flat, address, ask = link.buffers.take(nbytes), [0] * 6, False
            sent = flat
        if parts:
            torch.cat(parts, out=flat)
        header = torch.tensor([len(skeleton), nbytes, int(ask), *address], dtype=torch.int64)
        sends.append(group.send([header], dst, _HEADER))
        skeleton_bytes = torch.frombuffer(bytearray(skeleton), dtype=torch.uint8)
        sends.append(group.send([skeleton_bytes], dst, _SKELETON))
        if placed is None and nbytes:
            sends.append(group.send([flat], dst, _BYTES))
        result["bytes"] = nbytes

        their_header = torch.zeros(9, dtype=torch.int64)
        group.recv([their_header], src, _HEADER).wait()
        their_skeleton = torch.empty(int(their_header[0]), dtype=torch.uint8)
        group.recv([their_skeleton], src, _SKELETON).wait()
        their_bytes, asked = int(their_header[1]), bool(their_header[2])
        their_address = [int(x) for x in their_header[3:]]
        received = buffer = None
        if their_address[0]:  # in their memory
            received = link.shared_in.view(their_address, their_bytes)
            if asked:
                sends.append(group.send([torch.tensor([int(received is not None)])], src, _ANSWER))
            elif received is None:  # mapped before, not now: a new generation will ask again
                raise LinkBroken("the neighbour's shared memory could not be mapped")
        if received is None:
            received = buffer = link.buffers.take(their_bytes)
            if their_bytes:
                receiving.append(group.recv([received], src, _BYTES))

        if ask:  # the buddy has mapped this memfd, or asks for the bytes
            answer = torch.zeros(1, dtype=torch.int64)
            group.recv([answer], dst, _ANSWER).wait()
            if answer[0]:
                link.shared_out.confirmed.add(address[4])
            else:
                link.shared_out.usable = False
                sends.append(group.send([flat], dst, _BYTES))
                link.shared_out.close()  # `flat` keeps its mapping until the send ends
        arrived = _wait_all(receiving)
        receiving = []  # a gloo work waited twice waits for ever
        if not arrived:
            raise LinkBroken("the neighbour's record did not arrive")
        result["received"] = (_unpack(their_skeleton.numpy().tobytes(), received), buffer)
    except Exception as error:  # noqa: BLE001 - handed to the caller's thread by swap()
        result["error"] = error
    finally:
        # Gloo writes a receive's buffer and reads a send's until they end, whatever failed.
        _wait_all(receiving)
        if _wait_all(sends):
            if sent is not None:
                link.buffers.give([sent])
        else:
            result.setdefault("error", LinkBroken("a send to the buddy failed"))


def swap(
    group: dist.ProcessGroup,
    rank: int,
    world_size: int,
    shift: int,
    record,
    starts_cycle: bool,
    abort: threading.Event,
    link: Link,
):
    """Send `record` (a snapshot's, starting a cycle, or not) to rank + shift and receive rank
    - shift's; (received, the pool buffer it lies in or None, bytes sent). Gloo's sends and
    receives have no future and no completion flag before `wait()`, so a thread waits on them
    while this one watches `abort` (the group is aborted when a step is abandoned, which ends
    that thread's wait)."""
    result: dict = {}
    dst, src = (rank + shift) % world_size, (rank - shift) % world_size
    thread = threading.Thread(
        target=_exchange,
        args=(group, dst, src, record, starts_cycle, link, result),
        daemon=True,
        name="yoco-mirror",
    )
    thread.start()
    while thread.is_alive():
        thread.join(0.01)
        if abort.is_set():
            raise LinkBroken("the step was abandoned")
    error = result.get("error")
    if isinstance(error, RuntimeError | OSError):  # a peer or the group failed
        raise LinkBroken(str(error)) from error
    if error is not None:  # the record itself (a state that cannot be encoded): the user's
        raise error
    return *result["received"], result["bytes"]
