"""The corpus (tests/agent/scripts/): training scripts written the way popular projects write
them, each as its ordinary DDP script (transparent mode, unmodified) and ported to model-aware
mode (`X_yoco.py`; `diff X.py X_yoco.py` is the port, counted in docs/agent.md). Each survives an
unplanned kill, a thermal alarm and a drain in one run, and ends bit for bit where its
failure-free run ends: every tensor and number it saves (model, optimizer, scheduler, EMA)."""

from __future__ import annotations

import pytest
import torch

from tests.agent.conftest import LIVE_MIGRATION, event_types, incidents, kill_alarm_drain

pytestmark = pytest.mark.agent

# script, its arguments, steps per run, the steps at which to kill / alarm / drain (mid-epoch)
CORPUS = {
    "nanogpt": ("nanogpt", ["--max-iters", "30"], 30, (3, 9, 15)),
    "classifier": ("classifier", ["--epochs", "4"], 32, (3, 10, 17)),
    "plateau_lm": ("plateau_lm", ["--epochs", "3"], 30, (3, 9, 15)),
    "ema": ("ema", ["--epochs", "3"], 30, (3, 9, 15)),
}
# Slow enough that the test acts between steps (it sends kill, alarm and drain itself, in
# milliseconds; a drain still leaves half the run); sleeping does not change the numbers (the
# failure-free run does not sleep).
SLOW = ["--step-sleep", "0.2"]
MODES = {"model_aware": "_yoco.py", "transparent": ".py"}


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


@pytest.mark.parametrize(("case", "mode"), [(c, m) for c in sorted(CORPUS) for m in sorted(MODES)])
def test_corpus_script_survives_kill_thermal_drain_bit_identical(start_transparent, case, mode):
    name, args, total, (kill_at, alarm_at, drain_at) = CORPUS[case]
    script, transparent = name + MODES[mode], mode == "transparent"
    job = start_transparent("three", script, args + SLOW, 3, transparent=transparent)
    baseline = start_transparent(
        "baseline", script, args, 0, transparent=transparent
    )  # failure-free, alongside

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
        assert (types := event_types(events)) == LIVE_MIGRATION, types
        triggers.add(events[0]["data"]["trigger"])
        completed = events[2]["data"]
        # Transparent mode too: its spare catches up without the model's compute (issue 12).
        assert completed["steps_lost"] == 0, completed
    assert triggers == {"unplanned", "preemptive", "planned"}
    finished = job.events("job.finished")
    assert [e["data"] for e in finished] == [{"status": "completed", "step": total}]
