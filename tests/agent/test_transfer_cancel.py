"""A transfer whose other side died ends as soon as the coordinator cancels it, not at the
transfer timeout: before the two sides meet, gloo's own rendezvous would wait all of it."""

from __future__ import annotations

import datetime
import threading

import pytest
import torch.distributed as dist

from agent.transport import TransferError, pair_group

pytestmark = pytest.mark.agent


def test_a_transfer_whose_peer_never_comes_ends_when_cancelled():
    store = dist.TCPStore(
        "127.0.0.1", 0, is_master=True, wait_for_workers=False,
        timeout=datetime.timedelta(seconds=30),
    )  # fmt: skip
    cancelled = threading.Event()
    outcome: dict = {}

    def sender():
        try:
            pair_group(store, "peer-gone", 0, 3600, cancelled.is_set)
        except TransferError as error:
            outcome["error"] = str(error)

    thread = threading.Thread(target=sender, daemon=True)
    thread.start()
    thread.join(0.5)
    assert thread.is_alive()  # waiting for its peer
    cancelled.set()
    thread.join(60)  # far below the transfer's hour
    assert outcome == {"error": "the other side of the transfer is gone"}
