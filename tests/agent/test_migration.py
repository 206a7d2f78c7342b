"""The acceptance test of SPEC 2.3: three migrations, one per trigger, and a final model bit for
bit equal to a run without failures."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.agent.conftest import LIVE_MIGRATION, assert_bit_identical, event_types, incidents
from tests.agent.stall import StepSampler, assert_downtime_covers_stall

pytestmark = pytest.mark.agent
# Slow enough that the test can act between steps; sleeping does not change the numbers.
SLOW_STEPS = ["--step-sleep", "0.1"]


def test_three_triggers_bit_identical_to_failure_free_run(start_job, baseline):
    from tests.agent.conftest import GPT_ARGS

    job = start_job("three", workers=4, spares=3, script_args=GPT_ARGS + SLOW_STEPS)
    sampler = StepSampler(job)
    job.wait_step(6)
    killed_at = time.time()
    os.kill(job.worker_pid(1), signal.SIGKILL)  # unplanned
    job.wait_for(lambda: len(job.events("job.resumed")) == 1, what="recovery from SIGKILL")
    job.wait_step(20)
    job.inject("thermal", 2)  # pre-emptive
    job.wait_for(lambda: len(job.events("job.resumed")) == 2, what="pre-emptive migration")
    job.wait_step(36)
    job.drain(3)  # planned
    job.wait_for(lambda: len(job.events("job.resumed")) == 3, what="planned migration")
    assert job.wait_done() == 0, job.output()
    sampler.stop()

    assert_bit_identical(job.final_states(), baseline)
    by_trigger = {}
    for events in incidents(job).values():
        assert (types := event_types(events)) == LIVE_MIGRATION, types
        detected, started, completed, resumed = events
        by_trigger[detected["data"]["trigger"]] = (detected, started, completed, resumed)
        assert completed["data"]["steps_lost"] == 0
        assert completed["data"]["resumed_step"] == resumed["data"]["step"]
        assert completed["data"]["bytes"] > 0
        assert completed["data"]["verified"] is True  # the target holds the source's state
    assert set(by_trigger) == {"unplanned", "preemptive", "planned"}
    assert by_trigger["unplanned"][1]["data"]["state_source"] == "replica"
    assert by_trigger["unplanned"][0]["data"]["rank"] == 1
    assert_downtime_covers_stall(sampler, killed_at, list(by_trigger["unplanned"]))
    assert by_trigger["preemptive"][0]["data"]["category"] == "gpu_thermal"
    assert by_trigger["preemptive"][1]["data"]["state_source"] == "self"
    assert by_trigger["planned"][0]["data"]["category"] == "maintenance"
    assert by_trigger["planned"][1]["data"]["state_source"] == "self"
    (started,) = job.events("job.started")
    assert started["data"]["parallelism"] == {"dp_replicate": 4}
    assert started["data"]["spares"] == 3  # all of them, though they start after the workers
    assert {e["data"]["spare"] for e in job.events("migration.started")} == {"standby"}
    finished = job.events("job.finished")
    assert [e["data"] for e in finished] == [{"status": "completed", "step": 60}]
