"""How a shard mirror's record reaches the buddy (agent/mirror.py): one exchange per step, in
which every rank sends its record to rank + shift and receives rank - shift's.

The record's skeleton always goes over the training group (gloo). Its tensors' bytes go:

* through shared memory when the buddy is on the same host: the sender copies them into a
  memfd of its own and the buddy, having mapped it through `/proc/<pid>/fd/<fd>`, copies them
  out; a memory copy on each side instead of a loopback TCP stream, which on one host cost more
  than the rest of the mirror together (and the buddy's copy outlives the sender as any copy
  does). The buddy answers each such record (taken, or not mappable: another PID namespace,
  /proc hidden), so the sender never writes its memfd while the buddy reads it and falls back
  to gloo for that buddy from then on;
* over gloo otherwise, in one message (a message per tensor cost a round trip each).

Buffers come from a `BufferPool`, used again once let go: a fresh buffer per step cost a page
fault per 4 KiB as it filled, half the mirror's cost at 22 MB of gradients a step.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
from pathlib import Path

import torch
import torch.distributed as dist

from agent.skeleton import encode, tensor_specs, unflatten
from agent.state import as_bytes

_TAG = 1 << 20  # clear of the tags other traffic on the training group uses
_HEADER, _SKELETON, _BYTES, _ANSWER = range(_TAG, _TAG + 4)
_TOKEN_BYTES = 64  # the memfd's first bytes: its token (a word), then the record, aligned


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


def _host() -> int:
    """This host and PID namespace, as one number: a buddy with the same one can open this
    process's /proc/<pid>/fd (the boot id is the kernel's, shared by its containers; the
    namespace's inode tells containers apart)."""
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    namespace = os.stat("/proc/self/ns/pid").st_ino
    return int.from_bytes(hashlib.blake2b(f"{boot}/{namespace}".encode(), digest_size=7).digest())


class SharedOut:
    """The memfd this rank writes its records into for a buddy on the same host."""

    def __init__(self, wanted: bool):
        self.usable = wanted and hasattr(os, "memfd_create") and Path("/proc/self/ns/pid").exists()
        self.host = _host() if self.usable else 0
        self.token = int.from_bytes(os.urandom(7), "little")  # names this memfd to its reader
        self._fd: int | None = None
        self._memory: torch.Tensor | None = None

    def region(self, nbytes: int) -> torch.Tensor | None:
        """Where to write a record of `nbytes`; None when no shared memory can be had (the
        memory is reserved up front: a mapping the kernel cannot back would kill the process)."""
        size = _TOKEN_BYTES + nbytes
        if self._memory is None or self._memory.numel() < size:
            fd = None
            try:
                fd = os.memfd_create("yoco-mirror", os.MFD_CLOEXEC)
                os.ftruncate(fd, size)
                os.posix_fallocate(fd, 0, size)
                memory = torch.from_file(f"/proc/self/fd/{fd}", True, size, dtype=torch.uint8)
            except (OSError, RuntimeError):
                if fd is not None:
                    os.close(fd)
                self.usable = False
                return None
            memory[:8].view(torch.int64)[0] = self.token
            self.close()  # a buddy's mapping of the old memfd stays valid
            self._fd, self._memory = fd, memory
        return self._memory[_TOKEN_BYTES:size]

    def address(self) -> list[int]:
        assert self._fd is not None and self._memory is not None
        return [self.host, os.getpid(), self._fd, self._memory.numel(), self.token]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._memory = None, None


class SharedIn:
    """The mapping of the sending neighbour's memfd."""

    def __init__(self):
        self._address: list[int] | None = None
        self._memory: torch.Tensor | None = None

    def read(self, address: list[int], out: torch.Tensor) -> bool:
        """Copy the record at `address` into `out`; False when it cannot be mapped here."""
        host, pid, fd, size, token = address
        if address != self._address:
            self._address, self._memory = None, None
            if host != _host():
                return False
            try:
                memory = torch.from_file(f"/proc/{pid}/fd/{fd}", True, size, dtype=torch.uint8)
            except (OSError, RuntimeError):
                return False
            if int(memory[:8].view(torch.int64)[0]) != token:  # another process's fd
                return False
            self._address, self._memory = address, memory
        out.copy_(self._memory[_TOKEN_BYTES : _TOKEN_BYTES + out.numel()])
        return True


class Link:
    """One rank's ends of the exchange: its memfd for its buddy, its mapping of its sending
    neighbour's, and the pool of buffers. A new one for each generation of the groups."""

    def __init__(self, keep: int, shared_memory: bool = True):
        self.buffers = BufferPool(keep)
        self.shared_out = SharedOut(shared_memory)
        self.shared_in = SharedIn()

    @property
    def transport(self) -> str:
        """How this rank's records go to its buddy: "shared memory" until a buddy could not map
        it, then "gloo"."""
        return "shared memory" if self.shared_out.usable else "gloo"


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
        size = torch.empty(0, dtype=spec.dtype).element_size() * math.prod(spec.shape)
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


def _exchange(group, dst: int, src: int, record, link: Link, result: dict) -> None:
    """Send `record` to `dst` and receive `src`'s into result["received"] (tree, buffer). The
    order keeps a ring of ranks doing this at once free of waits on each other: every rank
    posts its sends before it blocks on a receive, and answers its sender before it waits for
    its own buddy's answer."""
    sends: list = []
    sent: torch.Tensor | None = None  # a pool buffer sent over gloo
    try:
        skeleton, parts, nbytes = _layout(record)
        region = link.shared_out.region(nbytes) if link.shared_out.usable else None
        flat = region if region is not None else link.buffers.take(nbytes)
        if parts:
            torch.cat(parts, out=flat)
        if region is None:
            sent = flat
        address = link.shared_out.address() if region is not None else [0] * 5
        header = torch.tensor([len(skeleton), nbytes, *address], dtype=torch.int64)
        sends += [
            group.send([header], dst, _HEADER),
            group.send([torch.frombuffer(bytearray(skeleton), dtype=torch.uint8)], dst, _SKELETON),
        ]
        if region is None and nbytes:
            sends.append(group.send([flat], dst, _BYTES))
        result["bytes"] = nbytes

        their_header = torch.zeros(7, dtype=torch.int64)
        group.recv([their_header], src, _HEADER).wait()
        their_skeleton = torch.empty(int(their_header[0]), dtype=torch.uint8)
        group.recv([their_skeleton], src, _SKELETON).wait()
        received = link.buffers.take(int(their_header[1]))
        their_address = [int(x) for x in their_header[2:]]
        receiving = []
        if their_address[0]:  # in their memfd: answer whether it was taken
            taken = link.shared_in.read(their_address, received)
            sends.append(group.send([torch.tensor([int(taken)])], src, _ANSWER))
            if not taken:
                receiving.append(group.recv([received], src, _BYTES))
        elif received.numel():
            receiving.append(group.recv([received], src, _BYTES))

        if region is not None:  # the buddy has read the memfd, or asks for the bytes
            answer = torch.zeros(1, dtype=torch.int64)
            group.recv([answer], dst, _ANSWER).wait()
            if not answer[0]:
                link.shared_out.usable = False
                link.shared_out.close()  # `region` keeps its mapping until the send ends
                sends.append(group.send([region], dst, _BYTES))
        if not _wait_all(receiving):
            raise LinkBroken("the neighbour's record did not arrive")
        result["received"] = (_unpack(their_skeleton.numpy().tobytes(), received), received)
    except RuntimeError as error:
        result["error"] = error
    finally:
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
    abort: threading.Event,
    link: Link,
):
    """Send `record` to rank + shift and receive rank - shift's; (received, the buffer it lies
    in, bytes sent). Gloo's sends and receives have no future and no completion flag before
    `wait()`, so a thread waits on them while this one watches `abort` (the group is aborted
    when a step is abandoned, which ends that thread's wait)."""
    result: dict = {}
    dst, src = (rank + shift) % world_size, (rank - shift) % world_size
    thread = threading.Thread(
        target=_exchange,
        args=(group, dst, src, record, link, result),
        daemon=True,
        name="yoco-mirror",
    )
    thread.start()
    while thread.is_alive():
        thread.join(0.01)
        if abort.is_set():
            raise LinkBroken("the step was abandoned")
    if "error" in result:
        raise LinkBroken(str(result["error"])) from result["error"]
    return *result["received"], result["bytes"]
