"""Messages that advise the user when live recovery is impossible fit the mode in use: never an
option the mode ignores (transparent mode has no checkpoint fallback)."""

from __future__ import annotations

import pytest

from agent.advice import NO_LIVE_COPY, NO_SPARE, no_live_recovery

REASONS = [NO_SPARE, NO_LIVE_COPY, "a spare could not receive the state: ValueError: x"]


@pytest.mark.parametrize("reason", REASONS)
@pytest.mark.parametrize("checkpoint_dir", [None, "ckpt"])
def test_transparent_mode_is_never_told_to_use_checkpoints(reason, checkpoint_dir):
    message = no_live_recovery("transparent", reason, checkpoint_dir)
    assert reason in message
    assert "--checkpoint-dir" not in message.replace("model-aware mode with --checkpoint-dir", "")
    assert "no checkpoint fallback" in message
    assert ("--spares" in message) == (reason == NO_SPARE)


@pytest.mark.parametrize("reason", REASONS)
def test_model_aware_mode_is_told_what_would_have_saved_it(reason):
    without = no_live_recovery("model_aware", reason, None)
    assert reason in without and "--checkpoint-dir" in without
    with_dir = no_live_recovery("model_aware", reason, "ckpt")
    assert "no complete checkpoint in ckpt yet" in with_dir
    assert ("--spares" in without) == (reason == NO_SPARE)
