"""Helpers for the state round-trip tests: a real two-rank gloo pair (the transport's own
`pair_group`, on a real TCPStore over loopback), and an exact comparison of two states."""

from __future__ import annotations

import math
import multiprocessing
import pickle
from collections import OrderedDict
from pathlib import Path

import numpy
import torch
import torch.distributed as dist

from agent import checkpoint
from agent.state import as_bytes
from agent.transport import pair_group, recv_state, send_state


class Pair:
    """Both ends of one transport pair group: the sender in a child process, fed each state
    pickled over a pipe (pickle keeps types, strides and bit patterns), the receiver here.
    Two ends in one process, on two threads, can wait forever forming the gloo pair."""

    def __init__(self, name: str = "roundtrip"):
        self.store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
        context = multiprocessing.get_context("spawn")
        self.pipe, child_end = context.Pipe()
        self.sender = context.Process(
            target=_send_forever, args=(self.store.port, name, child_end), daemon=True
        )
        self.sender.start()
        self.receiver = pair_group(self.store, name, 1, 120)

    def send(self, state, template=None):
        """`state` through send_state/recv_state; what the receiver rebuilt."""
        self.pipe.send_bytes(pickle.dumps(state))
        received = recv_state(self.receiver, template)
        failure = self.pipe.recv()
        if failure:
            raise AssertionError(f"the sender failed: {failure}")
        return received.state

    def close(self) -> None:
        self.pipe.send_bytes(b"")
        self.sender.join(timeout=30)
        self.sender.kill()


def _send_forever(port: int, name: str, pipe) -> None:
    store = dist.TCPStore("127.0.0.1", port, is_master=False)
    group = pair_group(store, name, 0, 120)
    while raw := pipe.recv_bytes():
        try:
            send_state(group, pickle.loads(raw))
            pipe.send(None)
        except Exception as error:  # noqa: BLE001 - reported to the test's process
            pipe.send(f"{type(error).__name__}: {error}")


def through_checkpoint(state, root: Path, step: int = 1):
    checkpoint.save_state(root, step, state)
    return checkpoint.load_state(root, step)


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
