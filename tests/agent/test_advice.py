"""Messages that advise the user when live recovery is impossible fit the mode in use: never an
option the mode ignores."""

from __future__ import annotations

import pytest

from agent.advice import NO_LIVE_COPY, NO_SPARE, no_live_recovery

REASONS = [NO_SPARE, NO_LIVE_COPY, "a spare could not receive the state: ValueError: x"]


@pytest.mark.parametrize("reason", REASONS)
@pytest.mark.parametrize("mode", ["model_aware", "transparent"])
def test_both_modes_are_told_what_would_have_saved_them(mode, reason):
    without = no_live_recovery(mode, reason, None)
    assert reason in without and "--checkpoint-dir" in without
    with_dir = no_live_recovery(mode, reason, "ckpt")
    assert "no complete checkpoint in ckpt yet" in with_dir
    assert ("--spares" in without) == (reason == NO_SPARE)


def test_a_mode_without_checkpoints_is_not_told_to_use_them():
    message = no_live_recovery("other", NO_SPARE, None)
    assert "--checkpoint-dir" not in message and "no checkpoint fallback" in message
