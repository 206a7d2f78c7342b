"""The same non-fatal alarm on every rank at once (a fault every process of the node reads)
moves only as many ranks as there are free spares; the others keep training, and the job ends
completed."""

from __future__ import annotations

import json

import pytest

from tests.agent.conftest import LIVE_MIGRATION, REPO, event_types, incidents

pytestmark = pytest.mark.agent


def test_alarm_on_every_rank_moves_one_per_free_spare_and_never_ends_the_job(
    start_job, tmp_path, monkeypatch
):
    faults = tmp_path / "faults.json"
    monkeypatch.setenv("YOCO_FAULT_FILE", str(faults))  # read by every worker and spare
    job = start_job(
        "alarm-everywhere",
        workers=2,
        spares=1,
        script_args=["--steps", "100", "--refuse-from", str(10**9)],  # every state loads
        script=REPO / "tests/agent/unloadable_state_job.py",
    )
    job.wait_step(5)  # with the spare ready: the job still has seconds to run, for the health
    # monitors that sample every second
    faults.write_text(json.dumps({"fault": "thermal"}))
    assert job.wait_done() == 0, job.output()

    assert [e["data"]["status"] for e in job.events("job.finished")] == ["completed"]
    (events,) = incidents(job).values()  # one spare: one move
    assert event_types(events) == LIVE_MIGRATION
    assert events[0]["data"]["trigger"] == "preemptive"
    assert "no free spare to move it to, so it keeps training" in job.output()
