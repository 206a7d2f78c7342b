"""CloudEvents 1.0 for the platform (SPEC 3): one builder per event type.

Every enumerated value is checked here, on the agent side, so a bad event is a bug caught in the
agent's tests rather than a rejection discovered on the platform.
"""

from __future__ import annotations

import datetime as dt
import uuid

TYPE_PREFIX = "io.yoco."
TRIGGERS = {"unplanned", "preemptive", "planned"}
CATEGORIES = {
    "gpu_xid", "gpu_ecc", "gpu_thermal", "gpu_hang", "nvlink", "pcie", "node_crash",
    "host_memory", "power", "network_link", "storage", "software_infra", "software_user",
    "sdc", "maintenance", "fail_slow", "unknown",
}  # fmt: skip
STATE_SOURCES = {"self", "replica", "mirror"}
SPARE_KINDS = {"standby", "reclaimed"}
MODES = {"model_aware", "transparent"}
JOB_STATUSES = {"completed", "failed", "cancelled"}
# Types whose events belong to one incident and therefore carry it as `subject`.
INCIDENT_TYPES = {
    "failure.detected", "migration.started", "migration.completed", "migration.failed",
    "checkpoint.restored", "job.resumed",
}  # fmt: skip


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def new_incident_id() -> str:
    return f"inc-{uuid.uuid4()}"


def _count(value: int | float) -> int:
    """Counts, steps and milliseconds are integers >= 0 on the wire."""
    return max(0, int(round(value)))


def _check(value: str, allowed: set[str], what: str) -> str:
    if value not in allowed:
        raise ValueError(f"{what} {value!r} is not one of {sorted(allowed)}")
    return value


class EventFactory:
    """Builds the SPEC 3 events of one job (`/clusters/{cluster}/jobs/{job}`)."""

    def __init__(self, cluster: str, job: str, mode: str = "model_aware"):
        self.source = f"/clusters/{cluster}/jobs/{job}"
        self.mode = _check(mode, MODES, "mode")

    def _event(self, kind: str, data: dict, subject: str | None = None) -> dict:
        if kind in INCIDENT_TYPES and not subject:
            raise ValueError(f"{kind} needs the incident id as subject")
        event = {
            "specversion": "1.0",
            "id": str(uuid.uuid4()),
            "source": self.source,
            "type": TYPE_PREFIX + kind,
            "time": now_rfc3339(),
            "datacontenttype": "application/json",
            "data": data,
        }
        if subject:
            event["subject"] = subject
        return event

    def job_started(
        self,
        world_size: int,
        model: str,
        gpus: int,
        *,
        spares: int,
        parallelism: dict[str, int],
        extra: dict | None = None,
    ) -> dict:
        """`spares`: standby spares at start; `parallelism`: dimension name -> size. `extra`:
        further data fields (SPEC allows them), e.g. transparent mode's `protected` /
        `unprotected`."""
        data = {
            "framework": "pytorch",
            "world_size": _count(world_size),
            "model": model,
            "gpus": _count(gpus),
            "mode": self.mode,
            "spares": _count(spares),
            "parallelism": {name: _count(size) for name, size in parallelism.items()},
            **(extra or {}),
        }
        return self._event("job.started", data)

    def job_finished(self, status: str, step: int) -> dict:
        data = {"status": _check(status, JOB_STATUSES, "status"), "step": _count(step)}
        return self._event("job.finished", data)

    def failure_detected(
        self,
        incident: str,
        *,
        trigger: str,
        category: str,
        rank: int,
        node: str,
        device: str,
        step: int,
        xid: int | None,
        detail: str,
    ) -> dict:
        data = {
            "trigger": _check(trigger, TRIGGERS, "trigger"),
            "category": _check(category, CATEGORIES, "category"),
            "rank": _count(rank),
            "node": node,
            "device": device,
            "step": _count(step),
            "xid": None if xid is None else _count(xid),
            "detail": detail,
        }
        return self._event("failure.detected", data, incident)

    def migration_started(
        self,
        incident: str,
        *,
        state_source: str,
        source: dict,
        target: dict,
        nbytes: int,
        spare: str = "standby",
    ) -> dict:
        data = {
            "mode": self.mode,
            "state_source": _check(state_source, STATE_SOURCES, "state_source"),
            "source": source,
            "target": target,
            "bytes": _count(nbytes),
            "spare": _check(spare, SPARE_KINDS, "spare"),
        }
        return self._event("migration.started", data, incident)

    def migration_completed(
        self,
        incident: str,
        *,
        steps_lost: int,
        duration_ms: float,
        nbytes: int,
        recompute_ms: float,
        resumed_step: int,
        verified: bool | None = None,
    ) -> dict:
        """`verified`: whether the target's digest of the moved state equalled the source's
        (None: not known, and left out)."""
        data = {
            "steps_lost": _count(steps_lost),
            "duration_ms": _count(duration_ms),
            "bytes": _count(nbytes),
            "recompute_ms": _count(recompute_ms),
            "resumed_step": _count(resumed_step),
        }
        if verified is not None:
            data["verified"] = bool(verified)
        return self._event("migration.completed", data, incident)

    def migration_failed(self, incident: str, reason: str) -> dict:
        return self._event("migration.failed", {"reason": reason}, incident)

    def checkpoint_restored(
        self, incident: str, *, steps_lost: int, checkpoint_step: int, duration_ms: float
    ) -> dict:
        data = {
            "steps_lost": _count(steps_lost),
            "checkpoint_step": _count(checkpoint_step),
            "duration_ms": _count(duration_ms),
        }
        return self._event("checkpoint.restored", data, incident)

    def job_resumed(self, incident: str, *, step: int, downtime_ms: float) -> dict:
        data = {"step": _count(step), "downtime_ms": _count(downtime_ms)}
        return self._event("job.resumed", data, incident)
