"""Misconfigurations end quickly with a message that says what to do, never a hang."""

from __future__ import annotations

import os
import re
import socket
import subprocess

import pytest

from tests.agent.conftest import PYTHON, REPO

pytestmark = pytest.mark.agent
ENV = dict(os.environ, PYTHONPATH=str(REPO))


def _agent(*args: str, timeout: float = 90, env=ENV) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "agent.cli", *args], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def test_script_that_registers_nothing_fails_the_job_with_a_clear_error(tmp_path):
    events = tmp_path / "events.jsonl"
    result = _agent(
        "run", "--workers", "2", "--events", str(events), "--",
        PYTHON, "tests/agent/scripts/register_nothing.py",
    )  # fmt: skip
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert "nothing is registered" in output
    assert '"status":"failed"' in events.read_text()


def test_world_size_that_the_processes_cannot_fill_is_refused(tmp_path):
    coordinator = subprocess.Popen(
        [PYTHON, "-m", "agent.cli", "coordinator", "--workers", "3", "--port", "0",
         "--store-port", "0", "--advertise", "127.0.0.1", "--join-timeout", "20",
         "--events", str(tmp_path / "events.jsonl")],
        cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        address = re.search(r"coordinator at (\S+)", coordinator.stdout.readline()).group(1)
        nodes = _agent(
            "run", "--connect", address, "--procs", "2", "--",
            PYTHON, "agent/examples/mlp.py", "--steps", "5",
        )  # fmt: skip
        output = coordinator.communicate(timeout=60)[0]
    finally:
        coordinator.kill()
    assert coordinator.returncode == 1
    assert "world size 3 cannot be filled: 2 of 3 workers joined" in output
    assert nodes.returncode != 0  # the two that joined stop with their coordinator


def test_unreachable_coordinator_is_reported_not_waited_for():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{probe.getsockname()[1]}"
    env = dict(ENV, YOCO_COORDINATOR=closed, YOCO_CONNECT_TIMEOUT_S="1")
    script = subprocess.run(
        [PYTHON, "agent/examples/mlp.py"], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert script.returncode != 0
    assert f"cannot reach the yoco coordinator at {closed}" in script.stderr
    cli = _agent("status", "--coordinator", closed, timeout=30)
    assert cli.returncode != 0
    assert "cannot reach the yoco coordinator" in cli.stderr + cli.stdout
