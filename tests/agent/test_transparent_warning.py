"""Transparent mode reports up front what it cannot capture (SPEC 2.2): a warning naming the
objects, and the job marked as not fully protected in job.started."""

from __future__ import annotations

import pytest

from tests.agent.transparent_job import TransparentJob

pytestmark = pytest.mark.agent


def test_state_the_agent_cannot_capture_is_named_up_front(tmp_path):
    job = TransparentJob(tmp_path, "unprotected.py", 2, 0, ["--steps", "4"])
    try:
        assert job.wait_done() == 0, job.output()
        (started,) = job.events("job.started")
        output = job.output()
    finally:
        job.stop()
    data = started["data"]
    assert data["mode"] == "transparent"
    assert data["protected"] is False
    names = " ".join(data["unprotected"])
    assert "tracker (RunningLoss" in names  # a tensor and a counter, no state_dict
    assert "data (generator" in names  # an iterator the agent cannot position
    assert "WARNING transparent mode cannot capture" in output
    assert "tracker (RunningLoss" in output
