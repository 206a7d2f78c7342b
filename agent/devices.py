"""Where a process trains, and what that allows between processes: the backend of the training
group, and whether training state can stream device to device.

Pure decisions over small, picklable descriptions, so they are tested without a GPU and both
ends of a transfer, deciding on the same two descriptions, always agree.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Endpoint:
    """One process, as far as moving tensors to or from it is concerned."""

    host: str  # hostname and boot id: equal only for processes of one running machine
    device: int | None  # the CUDA device it trains on (its index in this process); None: CPU
    uuids: tuple[str, ...] = ()  # every CUDA device this process sees, by index
    peers: tuple[int, ...] = ()  # devices `device` reads directly (peer access), itself included


def host_identity() -> str:
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}"


def here() -> Endpoint:
    """This process: its current CUDA device if it has one."""
    import torch

    host = host_identity()
    if not torch.cuda.is_available():
        return Endpoint(host, None)
    count = torch.cuda.device_count()
    uuids = tuple(cuda_uuid(i) for i in range(count))
    device = torch.cuda.current_device()
    peers = tuple(
        i for i in range(count) if i == device or torch.cuda.can_device_access_peer(device, i)
    )
    return Endpoint(host, device, uuids, peers)


def cuda_uuid(index: int) -> str:
    """The device's UUID as torch reports it ("" where this torch build has none: an empty one
    never matches, so such devices always take the host path)."""
    import torch

    return str(getattr(torch.cuda.get_device_properties(index), "uuid", "") or "")


def device_to_device(source: Endpoint, target: Endpoint) -> bool:
    """Can `target` copy `source`'s CUDA tensors straight from device memory (CUDA IPC)?

    Both on CUDA on one machine; the target sees the source's device under the same index (an
    IPC handle names its device by the sender's index); and the target trains on that very
    device, or on one with peer access to it. Anything else (other hosts, CPU, devices masked
    differently by CUDA_VISIBLE_DEVICES) streams through host memory."""
    if source.device is None or target.device is None or source.host != target.host:
        return False
    index = source.device
    if index >= len(source.uuids) or index >= len(target.uuids):
        return False
    same_device_seen = bool(source.uuids[index]) and source.uuids[index] == target.uuids[index]
    return same_device_seen and (target.device == index or index in target.peers)


def group_backend(placements: list[tuple[str, str]]) -> str:
    """The collective backend for a group of ranks, given each rank's (node, device) as the
    ranks report them ("cuda:0 NVIDIA H200", "cpu"). NCCL needs every rank on a GPU of its own:
    it refuses two ranks on one device. Otherwise gloo, which reduces CUDA tensors too (staged
    through host memory)."""
    devices = [(node, device.split()[0]) for node, device in placements]
    on_gpus = all(device.startswith("cuda") for _, device in devices)
    return "nccl" if devices and on_gpus and len(set(devices)) == len(devices) else "gloo"
