"""A sharded job (FSDP2, 4-way) survives a thermal alarm and a drain: the leaving rank streams
its own shard (parameters, optimizer state, RNG, data position) to a spare, the mesh's process
groups are re-formed under the same objects, and every rank's final shard is bit for bit the
failure-free run's."""

from __future__ import annotations

import pytest

from tests.agent.conftest import (
    FSDP_4,
    FSDP_ARGS,
    FSDP_SCRIPT,
    LIVE_MIGRATION,
    assert_bit_identical,
    event_types,
    incidents,
)

pytestmark = pytest.mark.agent


def test_fsdp_thermal_and_drain_bit_identical_to_failure_free_run(start_job, fsdp_baseline):
    job = start_job(
        "moved", workers=4, spares=2, script_args=FSDP_ARGS + FSDP_4 + ["--step-sleep", "0.1"],
        script=FSDP_SCRIPT,
    )  # fmt: skip
    job.wait_step(4)
    job.inject("thermal", 1)  # pre-emptive
    job.wait_for(lambda: len(job.events("job.resumed")) == 1, what="pre-emptive migration")
    job.wait_step(9)
    job.drain(2)  # planned
    job.wait_for(lambda: len(job.events("job.resumed")) == 2, what="planned migration")
    assert job.wait_done() == 0, job.output()

    assert_bit_identical(job.final_states(), fsdp_baseline)
    assert len(incidents(job)) == 2
    for events in incidents(job).values():
        assert (types := event_types(events)) == LIVE_MIGRATION, types
        started, completed = events[1]["data"], events[2]["data"]
        assert started["state_source"] == "self"
        assert completed["steps_lost"] == 0
        assert completed["verified"] is True
    (job_started,) = job.events("job.started")
    assert job_started["data"]["parallelism"] == {"dp_shard": 4}
