"""Transparent mode's catch-up (SPEC 2.3) where the script's control flow depends on the model's
values: a spare that runs the script to its end without reaching its resume step fails the job
with a reason, instead of leaving its peers waiting and the job reported as completed."""

from __future__ import annotations

import os
import signal

import pytest

pytestmark = pytest.mark.agent


def test_spare_that_cannot_reach_its_step_fails_the_job_with_the_reason(start_transparent):
    job = start_transparent("job", "loss_gated.py", ["--steps", "30", "--step-sleep", "0.2"], 1)
    job.wait_step(5)
    os.kill(job.worker_pid(1), signal.SIGKILL)
    assert job.wait_done() != 0
    assert "the script ended after" in job.output()
    assert [e["data"]["status"] for e in job.events("job.finished")] == ["failed"]
