"""Health thresholds, and which readings call for a migration.

Thresholds come from the `[health]` table of a TOML config file (`yoco-agent run --config`);
anything not set there keeps the default below. docs/agent.md lists them.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path


@dataclass
class Thresholds:
    interval_s: float = 1.0  # how often each source is sampled
    temperature_c: float = 90.0  # GPU core temperature at or above which we move off the GPU
    ecc_correctable_delta: int = 100  # correctable ECC errors since the job started
    ecc_uncorrectable: int = 1  # volatile uncorrectable ECC errors (contained ones: still alive)
    row_remap_pending: bool = True  # a pending row remap needs a GPU reset: migrate first
    thermal_throttle: bool = True  # HW/SW thermal slowdown active
    pcie_replay_delta: int = 1000  # PCIe replays since the job started (link degrading)
    recovery_action: bool = True  # the driver asks for a reset/reboot (action other than none)
    # Below this many MB available the node counts as about to OOM. Off (0) by default: a busy
    # healthy machine runs with little memory available, and the kernel's OOM killer, when it
    # does act, is an unplanned failure the agent recovers from anyway.
    host_memory_available_mb: int = 0
    # XIDs that say the GPU is degrading but alive (63/64: row remapping, 92: high SBE rate,
    # 94: contained ECC) and those that say it is gone (79: fallen off the bus, 48: DBE,
    # 95: uncontained ECC, 74: NVLink, 119/120: GSP).
    preemptive_xids: list[int] = field(default_factory=lambda: [63, 64, 92, 94])
    fatal_xids: list[int] = field(default_factory=lambda: [48, 74, 79, 95, 119, 120])


def load_thresholds(path: str | Path | None) -> Thresholds:
    if path is None:
        return Thresholds()
    with open(path, "rb") as f:
        table = tomllib.load(f).get("health", {})
    known = {f.name for f in fields(Thresholds)}
    unknown = set(table) - known
    if unknown:
        raise ValueError(f"unknown [health] settings in {path}: {sorted(unknown)}")
    return Thresholds(**table)


@dataclass(frozen=True)
class Alarm:
    category: str  # SPEC 3 failure category
    detail: str
    xid: int | None = None
    fatal: bool = False  # the device is gone: an unplanned failure, not a pre-emptive move


def evaluate(readings: dict, baseline: dict, limits: Thresholds) -> list[Alarm]:
    """Alarms for one set of readings. `baseline` holds the first readings of the job, for
    counters that only matter when they rise."""
    alarms: list[Alarm] = []
    xid = readings.get("xid")
    if xid is not None and xid in limits.fatal_xids:
        alarms.append(Alarm("gpu_xid", f"fatal XID {xid}", xid=xid, fatal=True))
    elif xid is not None and xid in limits.preemptive_xids:
        category = "gpu_ecc" if xid in (63, 64, 94) else "gpu_xid"
        alarms.append(Alarm(category, f"XID {xid}: GPU degrading", xid=xid))
    temperature = readings.get("temperature_c")
    if temperature is not None and temperature >= limits.temperature_c:
        alarms.append(
            Alarm("gpu_thermal", f"temperature {temperature:g} C >= {limits.temperature_c:g} C")
        )
    elif limits.thermal_throttle and readings.get("thermal_throttle"):
        alarms.append(Alarm("gpu_thermal", "thermal throttling active"))
    correctable = readings.get("ecc_correctable")
    if correctable is not None:
        rise = correctable - baseline.get("ecc_correctable", correctable)
        if rise >= limits.ecc_correctable_delta:
            alarms.append(Alarm("gpu_ecc", f"{rise} correctable ECC errors since start"))
    if readings.get("ecc_uncorrectable", 0) >= limits.ecc_uncorrectable:
        alarms.append(Alarm("gpu_ecc", f"{readings['ecc_uncorrectable']} uncorrectable ECC"))
    if limits.row_remap_pending and readings.get("row_remap_pending"):
        alarms.append(Alarm("gpu_ecc", "row remap pending"))
    replays = readings.get("pcie_replay")
    if replays is not None and replays - baseline.get("pcie_replay", replays) >= (
        limits.pcie_replay_delta
    ):
        alarms.append(Alarm("pcie", f"{replays} PCIe replays"))
    if limits.recovery_action and readings.get("recovery_action", 0):
        alarms.append(Alarm("gpu_xid", f"driver recovery action {readings['recovery_action']}"))
    available = readings.get("host_memory_available_mb")
    if available is not None and available < limits.host_memory_available_mb:
        alarms.append(Alarm("host_memory", f"{available} MB host memory available"))
    return alarms
