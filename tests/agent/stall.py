"""The stall a job saw, measured from outside (SPEC 2.3's rule for `downtime_ms`).

A sampler reads the job's `--status-file` on a thread and notes when each step was first seen
complete. The stall of an incident runs from the kill to the first step seen completed after the
recovery. `job.resumed.downtime_ms` starts at detection and ends when every rank has started
that step, so it must be at least the stall less the detection delay, one ordinary step, and how
stale the status file can be (its write interval plus the heartbeat that carries the steps); an
ordinary step is the longest one the sampler saw outside the incident, so the noise of sampling a
loaded machine is on both sides of the comparison.
"""

from __future__ import annotations

import datetime as dt
import threading
import time

from agent.coordinator import STATUS_WRITE_INTERVAL_S
from agent.settings import Settings

STALENESS_S = STATUS_WRITE_INTERVAL_S + Settings.heartbeat_interval_s


class StepSampler:
    def __init__(self, job, period_s: float = 0.02):
        self.job = job
        self.first_seen: dict[int, float] = {}  # step -> wall time it was first seen completed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(period_s,), daemon=True)
        self._thread.start()

    def _run(self, period_s: float) -> None:
        while not self._stop.wait(period_s):
            step = self.job.status().get("step")
            if step is not None and step not in self.first_seen:
                self.first_seen[step] = time.time()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def ordinary_step(self, killed_at: float, recovered_at: float) -> float:
        """The longest time per step between two sightings (the status file may show several
        steps at once), from step 1 on (step 0 is seen while the job starts): the last five
        before the kill, or, when the sampler saw too few steps then (a fast job on a loaded
        machine), the first three after the recovery."""
        seen = sorted((t, s) for s, t in self.first_seen.items() if s >= 1)
        pairs = [
            (a, b, (b - a) / (sb - sa)) for (a, sa), (b, sb) in zip(seen, seen[1:], strict=False)
        ]
        before = [per_step for a, b, per_step in pairs if b <= killed_at][-5:]
        after = [per_step for a, b, per_step in pairs if a >= recovered_at][:3]
        assert before or after, f"the sampler saw too few steps: {self.first_seen}"
        return max(before or after)

    def first_completed(self, step: int) -> float:
        return min(t for s, t in self.first_seen.items() if s >= step)


def assert_downtime_covers_stall(sampler: StepSampler, killed_at: float, events: list[dict]):
    """`events`: one incident's events. Returns the terms compared, for the record."""
    detected = next(e for e in events if e["type"] == "io.yoco.failure.detected")
    resumed = next(e for e in events if e["type"] == "io.yoco.job.resumed")
    detection_delay = dt.datetime.fromisoformat(detected["time"]).timestamp() - killed_at
    recovered_at = sampler.first_completed(resumed["data"]["step"] + 1)
    stall = recovered_at - killed_at
    step = sampler.ordinary_step(killed_at, recovered_at)
    downtime = resumed["data"]["downtime_ms"] / 1000
    allowed = stall - max(detection_delay, 0) - step - STALENESS_S
    terms = (
        f"downtime {downtime:.3f} s, stall {stall:.3f} s - detection {detection_delay:.3f} s "
        f"- one step {step:.3f} s - status staleness {STALENESS_S:.3f} s = {allowed:.3f} s"
    )
    assert downtime >= allowed, terms
    return terms
