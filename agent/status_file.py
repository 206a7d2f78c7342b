"""The job's status: the snapshot `yoco-agent status` shows and `--status-file` keeps current.

The file is replaced atomically (write beside it, rename), so a reader never sees half of it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from agent.membership import Member

STATUS_WRITE_INTERVAL_S = 0.2  # the --status-file is rewritten at most this often


def status_document(
    *,
    generation: int,
    step: int,
    address: str,
    members: list[Member],
    transfer: dict | None,
    incidents: list[dict],
    spares_pending: int,
) -> dict:
    """`transfer`: the state transfer in flight; `incidents`: detected, not yet resumed;
    `spares_pending`: local spares not started or still loading (agent/spares.py)."""
    return {
        "generation": generation,
        "step": step,
        "address": address,
        "members": [
            {
                "role": m.role,
                "rank": m.rank,
                "pid": m.pid,
                "node": m.node,
                "step": m.step,
                "device": m.device,
                "ready": m.ready,
                "heartbeat_age_s": round(time.monotonic() - m.last_seen, 2),
                "alarm": (m.last_alarm or {}).get("detail"),
            }
            for m in members
        ],
        "transfer": transfer,
        "incidents": incidents,
        "spares_pending": spares_pending,
    }


class StatusFile:
    def __init__(self, path: str | None, status: Callable[[], dict]):
        """`path`: None when there is no file to keep; `status()`: the document to write."""
        self.path = Path(path) if path else None
        self.status = status
        self._written = 0.0

    def due(self) -> bool:
        return time.monotonic() - self._written > STATUS_WRITE_INTERVAL_S

    def write(self) -> None:
        self._written = time.monotonic()
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.status()))
        os.replace(tmp, self.path)
