"""A sharded job (FSDP2, 4-way) survives a thermal alarm and a drain: the leaving rank streams
its own shard (parameters, optimizer state, RNG, data position) to a spare, the mesh's process
groups are re-formed under the same objects, and every rank's final shard is bit for bit the
failure-free run's."""

from __future__ import annotations

import pytest

from bench.job import REPO
from tests.agent.conftest import assert_bit_identical, incidents

pytestmark = pytest.mark.agent
SCRIPT = REPO / "agent/examples/fsdp_gpt.py"
FSDP_ARGS = ["--steps", "16", "--dim", "32", "--heads", "2", "--layers", "2", "--seq", "16",
             "--batch", "4", "--vocab", "64", "--seed", "7", "--shard", "4"]  # fmt: skip


def test_fsdp_thermal_and_drain_bit_identical_to_failure_free_run(start_job):
    baseline = start_job("baseline", workers=4, script_args=FSDP_ARGS, script=SCRIPT)
    assert baseline.wait_done() == 0, baseline.output()
    job = start_job(
        "moved", workers=4, spares=2, script_args=FSDP_ARGS + ["--step-sleep", "0.1"],
        script=SCRIPT,
    )  # fmt: skip
    job.wait_step(4)
    job.inject("thermal", 1)  # pre-emptive
    job.wait_for(lambda: len(job.events("job.resumed")) == 1, what="pre-emptive migration")
    job.wait_step(9)
    job.drain(2)  # planned
    job.wait_for(lambda: len(job.events("job.resumed")) == 2, what="planned migration")
    assert job.wait_done() == 0, job.output()

    assert_bit_identical(job.final_states(), baseline.final_states())
    assert len(incidents(job)) == 2
    for events in incidents(job).values():
        types = [e["type"].removeprefix("io.yoco.") for e in events]
        assert types == [
            "failure.detected",
            "migration.started",
            "migration.completed",
            "job.resumed",
        ], types
        started, completed = events[1]["data"], events[2]["data"]
        assert started["state_source"] == "self"
        assert completed["steps_lost"] == 0
        assert completed["verified"] is True
    (job_started,) = job.events("job.started")
    assert job_started["data"]["parallelism"] == {"dp_shard": 4}
