"""Transparent mode (SPEC 2.2): unmodified training scripts survive an unplanned kill, a
pre-emptive alarm and a planned drain, and end bit for bit where their failure-free runs end."""

from __future__ import annotations

import pytest

from tests.agent.conftest import (
    LIVE_MIGRATION,
    assert_bit_identical,
    event_types,
    incidents,
    kill_alarm_drain,
)
from tests.agent.stall import StepSampler, assert_downtime_covers_stall

pytestmark = pytest.mark.agent

SLOW = ["--step-sleep", "0.05"]
# script, its arguments, total steps, the steps at which to kill / alarm / drain
CASES = {
    "ddp_bn": ("ddp_bn.py", ["--epochs", "5"], 40, (5, 16, 28)),
    "accum_sched": ("accum_sched.py", ["--epochs", "4"], 48, (5, 18, 33)),
    "amp_scaler": ("amp_scaler.py", ["--steps", "40"], 40, (5, 16, 28)),
    "manual_allreduce": ("manual_allreduce.py", ["--steps", "150"], 150, (5, 30, 70)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_unmodified_script_survives_three_triggers_bit_identical(start_transparent, case):
    script, args, total, (kill_at, alarm_at, drain_at) = CASES[case]
    job = start_transparent("three", script, args + SLOW, 3)
    baseline = start_transparent("baseline", script, args, 0)  # the failure-free run, alongside

    sampler = StepSampler(job)
    killed_at = kill_alarm_drain(job, (kill_at, alarm_at, drain_at), ranks=(1, 0, 1))
    assert job.wait_done() == 0, job.output()
    sampler.stop()
    assert baseline.wait_done() == 0, baseline.output()

    states, expected = job.final_states(), baseline.final_states()
    assert len(states) == 2
    assert_bit_identical(states, expected)
    if "scaler" in expected[0]:
        assert [s["scaler"] for s in states] == [s["scaler"] for s in expected]

    (started,) = job.events("job.started")
    assert started["data"]["mode"] == "transparent"
    assert started["data"]["protected"] is True
    triggers = set()
    for events in incidents(job).values():
        assert (types := event_types(events)) == LIVE_MIGRATION, types
        triggers.add(events[0]["data"]["trigger"])
        assert events[1]["data"]["mode"] == "transparent"
        # The spare caught up without the model's compute: nothing run again (issue 12).
        assert events[2]["data"]["steps_lost"] == 0
        if events[0]["data"]["trigger"] == "unplanned":
            assert_downtime_covers_stall(sampler, killed_at, events)
        assert events[2]["data"]["bytes"] > 0
        assert events[2]["data"]["verified"] is True
    assert triggers == {"unplanned", "preemptive", "planned"}
    finished = job.events("job.finished")
    assert [e["data"] for e in finished] == [{"status": "completed", "step": total}]
