"""The corpus (tests/agent/scripts/): training scripts written the way popular projects write
them, each as its ordinary DDP script (transparent mode, unmodified) and ported to model-aware
mode (`X_yoco.py`; `diff X.py X_yoco.py` is the port, counted in docs/agent.md). Each survives an
unplanned kill, a thermal alarm and a drain in one run, and ends bit for bit where its
failure-free run ends: every tensor and number it saves (model, optimizer, scheduler, EMA)."""

from __future__ import annotations

import pytest
import torch

from tests.agent.conftest import incidents, kill_alarm_drain
from tests.agent.transparent_job import TransparentJob

pytestmark = pytest.mark.agent

# script, its arguments, steps per run, the steps at which to kill / alarm / drain (mid-epoch)
CORPUS = {
    "nanogpt": ("nanogpt", ["--max-iters", "30"], 30, (3, 9, 15)),
    "classifier": ("classifier", ["--epochs", "4"], 32, (3, 10, 17)),
    "plateau_lm": ("plateau_lm", ["--epochs", "3"], 30, (3, 9, 15)),
    "ema": ("ema", ["--epochs", "3"], 30, (3, 9, 15)),
}
# Slow enough that the test acts between steps, even when a loaded machine starts the CLI in
# seconds; sleeping does not change the numbers (the failure-free run does not sleep).
SLOW = ["--step-sleep", "0.4"]
MODES = {"model_aware": "_yoco.py", "transparent": ".py"}


@pytest.fixture
def start(tmp_path):
    jobs = []

    def start(name, script, args, spares, transparent):
        directory = tmp_path / name
        directory.mkdir()
        job = TransparentJob(directory, script, 2, spares, args, transparent=transparent)
        jobs.append(job)
        return job

    yield start
    for job in jobs:
        job.stop()


def assert_same(got, want, path="state") -> None:
    """Every tensor torch.equal, every other value ==, the same structure."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and torch.equal(got, want), path
    elif isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), path
        for key in want:
            assert_same(got[key], want[key], f"{path}[{key!r}]")
    elif isinstance(want, list | tuple):
        assert type(got) is type(want) and len(got) == len(want), path
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_same(a, b, f"{path}[{i}]")
    else:
        assert got == want, path


NOT_YET = {
    ("nanogpt", "transparent"): "after its migrations nanogpt.py under transparent mode ends "
    "with other weights than its failure-free run; cause not found yet (transparent catch-up "
    "is being replaced, issue 12)"
}


@pytest.mark.parametrize(
    ("case", "mode"),
    [
        pytest.param(c, m, marks=[pytest.mark.xfail(strict=True, reason=NOT_YET[c, m])])
        if (c, m) in NOT_YET
        else (c, m)
        for c in sorted(CORPUS)
        for m in sorted(MODES)
    ],
)
def test_corpus_script_survives_kill_thermal_drain_bit_identical(start, case, mode):
    name, args, total, (kill_at, alarm_at, drain_at) = CORPUS[case]
    script, transparent = name + MODES[mode], mode == "transparent"
    job = start("three", script, args + SLOW, 3, transparent)
    baseline = start("baseline", script, args, 0, transparent)  # failure-free, alongside

    kill_alarm_drain(job, (kill_at, alarm_at, drain_at), ranks=(1, 0, 1))
    assert job.wait_done() == 0, job.output()
    assert baseline.wait_done() == 0, baseline.output()

    states, expected = job.final_states(), baseline.final_states()
    assert len(states) == len(expected) == 2
    for state, want in zip(states, expected, strict=True):
        assert_same(state, want)
    # As under DDP, the replicas are equal: same start (rank 0's weights), same reduced update.
    assert_same(expected[1]["model"], expected[0]["model"])

    (started,) = job.events("job.started")
    assert started["data"]["mode"] == mode
    assert started["data"]["protected"] is True
    triggers = set()
    for events in incidents(job).values():
        types = [e["type"].removeprefix("io.yoco.") for e in events]
        assert types == [
            "failure.detected",
            "migration.started",
            "migration.completed",
            "job.resumed",
        ], types
        triggers.add(events[0]["data"]["trigger"])
        completed = events[2]["data"]
        # A transparent spare replays every step before the resume step, and says so (until
        # transparent mode stops replaying, issue 12).
        replayed = completed["resumed_step"] if transparent else 0
        assert completed["steps_lost"] == replayed, completed
    assert triggers == {"unplanned", "preemptive", "planned"}
    finished = job.events("job.finished")
    assert [e["data"] for e in finished] == [{"status": "completed", "step": total}]
