"""Measurements made in child processes a benchmark spawns itself: the children, a TCPStore the
parent serves them, and their results on a queue, each wait bounded and every child ended however
the measurement ends. Used by bench/agent.py and bench/sharded.py."""

from __future__ import annotations

import contextlib
import datetime
import queue
import time

import torch.distributed as dist
import torch.multiprocessing as mp


@contextlib.contextmanager
def children_of(target, args_per_child: list[tuple]):
    """One spawned process per entry, running `target(*args, messages)`; yields the messages
    queue and the processes, and ends the processes however the block ends."""
    ctx = mp.get_context("spawn")
    messages = ctx.Queue()
    children = [ctx.Process(target=target, args=(*args, messages)) for args in args_per_child]
    try:
        for child in children:
            child.start()
        yield messages, children
    finally:
        for child in children:
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
                child.join(timeout=10)


def receive(messages, children, timeout_s: float, what: str):
    """The next message from the children, within `timeout_s`; an error as soon as one dies."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return messages.get(timeout=1)
        except queue.Empty:
            dead = [c.exitcode for c in children if c.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"{what}: a child process died (exit {dead})") from None
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: nothing within {timeout_s:g} s") from None


def store_server(timeout_s: float = 60) -> dist.TCPStore:
    """A TCPStore served by this (the parent) process on a port it binds itself; the children
    connect to its port."""
    return dist.TCPStore(
        "127.0.0.1", 0, is_master=True, wait_for_workers=False,
        timeout=datetime.timedelta(seconds=timeout_s),
    )  # fmt: skip


def store_client(port: int, timeout_s: float = 60) -> dist.TCPStore:
    return dist.TCPStore(
        "127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=timeout_s)
    )
