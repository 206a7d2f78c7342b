"""What the agent tells the user when live recovery is impossible: why, and what would help in
the mode the job runs in. One place, so no message advises an option the mode ignores."""

from __future__ import annotations

# Modes whose workers can roll back to a checkpoint (transparent mode cannot restart an
# unmodified script at a checkpointed step).
CHECKPOINT_FALLBACK_MODES = frozenset({"model_aware"})

# Why live recovery was impossible.
NO_SPARE = "no spare left"
NO_LIVE_COPY = "no live copy of the state"


def has_checkpoint_fallback(mode: str) -> bool:
    return mode in CHECKPOINT_FALLBACK_MODES


def no_live_recovery(mode: str, reason: str, checkpoint_dir: str | None) -> str:
    """The job-failed message when live recovery is impossible for `reason` and no checkpoint
    could be restored."""
    if not has_checkpoint_fallback(mode):
        help_ = "transparent mode has no checkpoint fallback (it cannot roll an unmodified script "
        help_ += "back to a step)"
        if reason == NO_SPARE:
            help_ += "; start more standby spares (--spares)"
        elif reason != NO_LIVE_COPY:
            help_ += "; model-aware mode with --checkpoint-dir would have rolled back instead"
        return f"live recovery impossible ({reason}): {help_}"
    if checkpoint_dir:
        help_ = f"and no complete checkpoint in {checkpoint_dir} yet to fall back to"
    else:
        help_ = "and no checkpoint to fall back to; run with --checkpoint-dir and "
        help_ += "--checkpoint-every"
    if reason == NO_SPARE:
        help_ += ", or start more standby spares (--spares)"
    return f"live recovery impossible ({reason}) {help_}"
