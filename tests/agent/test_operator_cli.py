"""The operator's commands (`yoco-agent status`, `inject`, `drain`) as an operator runs them:
separate processes talking to a running job's coordinator, on a job long enough that their
start-up time does not matter."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.agent.conftest import GPT_ARGS, PYTHON, REPO

pytestmark = pytest.mark.agent


def _cli(job, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "agent.cli", *args, "--coordinator", job.address()],
        cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


def test_status_inject_and_drain_from_the_command_line(start_job):
    endless = [*GPT_ARGS, "--step-sleep", "0.1"]
    endless[endless.index("--steps") + 1] = str(10**6)
    job = start_job("operated", workers=2, spares=2, script_args=endless)
    job.wait_step(2)

    status = _cli(job, "status", "--json")
    assert status.returncode == 0, status.stderr
    members = json.loads(status.stdout)["members"]
    assert sorted(m["rank"] for m in members if m["role"] == "worker") == [0, 1]

    injected = _cli(job, "inject", "thermal", "--rank", "1")
    assert injected.returncode == 0, injected.stderr
    job.wait_for(lambda: len(job.events("job.resumed")) == 1, what="pre-emptive migration")
    drained = _cli(job, "drain", "--rank", "0")
    assert drained.returncode == 0, drained.stderr
    job.wait_for(lambda: len(job.events("job.resumed")) == 2, what="planned migration")
    triggers = [e["data"]["trigger"] for e in job.events("failure.detected")]
    assert triggers == ["preemptive", "planned"]

    neither = _cli(job, "drain")
    assert neither.returncode == 2 and "exactly one of --rank or --node" in neither.stderr
    unknown = _cli(job, "inject", "meteor", "--rank", "0")
    assert unknown.returncode == 2 and "unknown fault 'meteor'" in unknown.stderr
