"""A state every spare fails to receive the same way does not burn the spare pool: the reason
names the real error, the second identical failure stops the attempts, and the job falls back to
its checkpoint, saying why."""

from __future__ import annotations

import os
import signal

import pytest

from tests.agent.conftest import REPO, event_types, incidents

pytestmark = pytest.mark.agent


def test_second_identical_receive_failure_stops_and_restores_the_checkpoint(start_job, tmp_path):
    checkpoints = ["--checkpoint-dir", str(tmp_path / "ckpt"), "--checkpoint-every", "10"]
    job = start_job(
        "unloadable",
        workers=2,
        spares=3,
        extra=checkpoints,
        # Only the checkpoints (every 10 steps) load: a live state anywhere else is refused.
        script_args=[
            "--steps",
            "100",
            "--step-sleep",
            "0.05",
            "--refuse-from",
            "1",
            "--loadable-every",
            "10",
        ],  # fmt: skip
        script=REPO / "tests/agent/unloadable_state_job.py",
    )
    # With the three spares ready (test jobs start them before the first step) and a checkpoint
    # taken; the kill lands between two checkpoints, from step 12 to 16 (or 22 to 26, ...), far
    # enough from the end that the failure runs its course before the job could end.
    job.wait_step(12)
    job.wait_for(lambda: 2 <= job.status()["step"] % 10 <= 6, what="a step between checkpoints")
    os.kill(job.worker_pid(1), signal.SIGKILL)
    assert job.wait_done() == 0, job.output()

    (events,) = incidents(job).values()
    assert (types := event_types(events)) == [
        "failure.detected",
        "migration.started",
        "migration.failed",
        "migration.started",
        "migration.failed",
        "checkpoint.restored",
        "job.resumed",
    ], types
    first, second = events[2]["data"]["reason"], events[4]["data"]["reason"]
    assert "could not receive the state: ValueError: a count of" in first
    assert "past what this object can load" in first
    assert "a second spare failed the same way" in second
    checkpoint_step = events[5]["data"]["checkpoint_step"]
    assert checkpoint_step % 10 == 0 and checkpoint_step >= 10
    assert events[5]["data"]["steps_lost"] >= 1
    assert f"restoring the checkpoint of step {checkpoint_step}" in job.output()
    # The third spare was never tried: it is still there, unused, when the job ends.
    assert sum(1 for m in job.status()["members"] if m["role"] == "spare") >= 1
