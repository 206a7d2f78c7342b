"""Helpers for the state round-trip tests: a real two-rank gloo pair (the transport's own
`pair_group`, on a real TCPStore over loopback), and an exact comparison of two states."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from pathlib import Path

import numpy
import torch
import torch.distributed as dist

from agent import checkpoint
from agent.state import as_bytes
from agent.transport import pair_group, recv_state, send_state


class Pair:
    """Both ends of one transport pair group, in this process (the sender on a thread)."""

    def __init__(self, name: str = "roundtrip"):
        self.store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
        groups: dict[int, dist.ProcessGroup] = {}

        def join(rank: int) -> None:
            groups[rank] = pair_group(self.store, name, rank, 30)

        thread = threading.Thread(target=join, args=(0,))
        thread.start()
        join(1)
        thread.join()
        self.sender, self.receiver = groups[0], groups[1]

    def send(self, state, template=None):
        """`state` through send_state/recv_state; what the receiver rebuilt."""
        failure: list[BaseException] = []

        def send() -> None:
            try:
                send_state(self.sender, state)
            except BaseException as error:  # noqa: BLE001 - re-raised in the test's thread
                failure.append(error)

        thread = threading.Thread(target=send)
        thread.start()
        try:
            received = recv_state(self.receiver, template)
        finally:
            thread.join()
        if failure:
            raise failure[0]
        return received.state


def through_checkpoint(state, root: Path, step: int = 1):
    checkpoint.save_replicated(root, step, state)
    return checkpoint.load_replicated(root, step)


def assert_same(got, want, path: str = "") -> None:
    """Equal in type and value all the way down; tensors and floats bit for bit."""
    where = path or "top level"
    assert type(got) is type(want), f"{where}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape, where
        assert torch.equal(as_bytes(got.cpu()), as_bytes(want.cpu())), where
        if isinstance(want, torch.nn.Parameter):
            assert got.requires_grad == want.requires_grad, where
    elif isinstance(want, dict):
        assert list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for (k1, v1), (k2, v2) in zip(got.items(), want.items(), strict=True):
            assert type(k1) is type(k2), f"{where}: key {k1!r}"
            assert_same(v1, v2, f"{path}/{k1}")
        if isinstance(want, OrderedDict):
            assert getattr(got, "_metadata", None) == getattr(want, "_metadata", None), where
    elif isinstance(want, list | tuple):
        assert len(got) == len(want), where
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_same(a, b, f"{path}/{i}")
    elif isinstance(want, numpy.ndarray):
        assert got.dtype == want.dtype and numpy.array_equal(got, want), where
    elif isinstance(want, float):
        assert got.hex() == want.hex() or (math.isnan(got) and math.isnan(want)), where
    elif isinstance(want, complex):
        assert_same((got.real, got.imag), (want.real, want.imag), path)
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"
