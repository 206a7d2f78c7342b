"""One real cross-process round trip: another process builds the state of every torch
optimizer, scheduler, a GradScaler and every RNG kind after real steps and streams it with
`send_state`; this one receives it and finds exactly what it builds itself from the same seed."""

from __future__ import annotations

import os
import subprocess
import textwrap

import pytest
import torch
import torch.distributed as dist

from agent.transport import pair_group, recv_state
from tests.agent import training_zoo as zoo
from tests.agent.conftest import PYTHON, REPO
from tests.agent.roundtrip import assert_same

pytestmark = pytest.mark.agent

SENDER = textwrap.dedent(
    """
    import sys, datetime, torch, torch.distributed as dist
    from agent.transport import pair_group, send_state
    from tests.agent import training_zoo as zoo
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=False,
                          timeout=datetime.timedelta(seconds=60))
    send_state(pair_group(store, "across", 0, 60), zoo.everything(seed=3))
    """
)


def test_everything_crosses_to_another_process_unchanged():
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    sender = subprocess.Popen(
        [PYTHON, "-c", SENDER, str(store.port)],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    try:
        received = recv_state(pair_group(store, "across", 1, 60), None)
        assert sender.wait(timeout=60) == 0
    finally:
        sender.kill()
    assert_same(received.state, zoo.everything(seed=3))
    assert received.nbytes > 0
