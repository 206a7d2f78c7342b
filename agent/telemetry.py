"""The health monitor: pluggable sources of readings, sampled on a thread, judged by policy.py.

Sources return a flat dict of readings (see policy.evaluate for the keys). NVML is used when a
GPU and nvidia-ml-py are present; host metrics always; fault injection (a control command or a
file) for tests and demos.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Protocol

from agent.policy import Alarm, Thresholds, evaluate

# What each injectable fault looks like to the policy.
FAULTS = {
    "thermal": {"temperature_c": 104.0, "thermal_throttle": True},
    "ecc": {"ecc_correctable": 10**6, "row_remap_pending": True},
    "xid": {"xid": 79},
}


class Source(Protocol):
    def sample(self) -> dict: ...


class NvmlSource:
    """One GPU through NVML (nvidia-ml-py). Every query is guarded: drivers and nvidia-ml-py
    versions differ in what they support (and in some functions' names), and a missing counter
    must not stop the others."""

    def __init__(self, handle):
        import pynvml

        self.nvml = pynvml
        self.handle = handle
        self.events = None
        try:
            self.events = pynvml.nvmlEventSetCreate()
            pynvml.nvmlDeviceRegisterEvents(
                handle, pynvml.nvmlEventTypeXidCriticalError, self.events
            )
        except (pynvml.NVMLError, AttributeError):  # not supported, or not permitted here
            self.events = None

    @property
    def xid_readable(self) -> bool:
        """Whether XID events reach this source (registration can be refused, e.g. in a VM)."""
        return self.events is not None

    @classmethod
    def for_cuda_device(cls, index: int) -> NvmlSource:
        """The NVML device behind CUDA device `index`. Found by UUID: NVML numbers devices in
        PCI order and ignores CUDA_VISIBLE_DEVICES, so the indices need not agree."""
        import pynvml

        from agent.devices import cuda_uuid

        pynvml.nvmlInit()
        uuid = cuda_uuid(index)
        try:
            return cls(pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}"))
        except pynvml.NVMLError:  # no UUID from torch, or a MIG slice: the index it is
            return cls(pynvml.nvmlDeviceGetHandleByIndex(index))

    @classmethod
    def for_current_device(cls) -> NvmlSource | None:
        import torch

        if not torch.cuda.is_available():
            return None
        try:
            return cls.for_cuda_device(torch.cuda.current_device())
        except Exception as error:  # no nvidia-ml-py, no driver: run without GPU telemetry
            print(
                f"yoco agent: no NVML telemetry for this GPU ({type(error).__name__}: {error}); "
                "thermal, ECC and XID alarms are off (install nvidia-ml-py)",
                file=sys.stderr,
                flush=True,
            )
            return None

    def _query(self, readings: dict, key: str, fn: Callable) -> None:
        try:
            readings[key] = fn()
        except (self.nvml.NVMLError, AttributeError):  # unsupported, or absent in this version
            pass

    def _clock_reasons(self) -> int:
        """Why the clocks are held down (a bit mask); named "event reasons" in newer NVML."""
        nvml = self.nvml
        query = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        query = query or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        return int(query(self.handle))

    def sample(self) -> dict:
        nvml, handle = self.nvml, self.handle
        readings: dict = {}
        self._query(
            readings,
            "temperature_c",
            lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
        )
        self._query(
            readings,
            "ecc_correctable",
            lambda: nvml.nvmlDeviceGetTotalEccErrors(
                handle, nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, nvml.NVML_VOLATILE_ECC
            ),
        )
        self._query(
            readings,
            "ecc_uncorrectable",
            lambda: nvml.nvmlDeviceGetTotalEccErrors(
                handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
            ),
        )
        self._query(
            readings, "row_remap_pending", lambda: bool(nvml.nvmlDeviceGetRemappedRows(handle)[2])
        )
        self._query(readings, "clock_reasons", self._clock_reasons)
        if "clock_reasons" in readings:
            readings["thermal_throttle"] = bool(readings["clock_reasons"] & THERMAL_REASONS)
        self._query(readings, "pcie_replay", lambda: nvml.nvmlDeviceGetPcieReplayCounter(handle))
        field_id = getattr(nvml, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", None)
        if field_id is not None:
            self._query(
                readings,
                "recovery_action",
                lambda: nvml.nvmlDeviceGetFieldValues(handle, [field_id])[0].value.uiVal,
            )
        if self.events is not None:
            wait = getattr(nvml, "nvmlEventSetWait_v2", None) or nvml.nvmlEventSetWait
            try:
                readings["xid"] = int(wait(self.events, 0).eventData)
            except nvml.NVMLError:  # timeout: no XID since the last sample
                pass
        return readings


# NVML's clock reason bits for software (0x20) and hardware (0x40) thermal slowdown; the
# values are fixed by the NVML API, whatever nvidia-ml-py version names them.
THERMAL_REASONS = 0x20 | 0x40


class HostSource:
    def sample(self) -> dict:
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return {"host_memory_available_mb": int(line.split()[1]) // 1024}
        except OSError:
            pass
        return {}


class FaultInjectionSource:
    """Faults injected by a control command (`yoco-agent inject`) or written to a file (a JSON
    object: {"fault": "thermal"} or raw readings such as {"temperature_c": 97})."""

    def __init__(self, path: str | None):
        self.path = Path(path) if path else None
        self._injected: dict = {}
        self._lock = threading.Lock()

    def inject(self, fault: dict) -> None:
        with self._lock:
            self._injected.update(FAULTS[fault["kind"]])
            if fault.get("xid") is not None:
                self._injected["xid"] = int(fault["xid"])

    def sample(self) -> dict:
        with self._lock:
            readings = dict(self._injected)
        if self.path is not None and self.path.exists():
            try:
                written = json.loads(self.path.read_text() or "{}")
            except json.JSONDecodeError:
                written = {}
            if "fault" in written:
                readings.update(FAULTS[written.pop("fault")])
            readings.update(written)
        return readings


class HealthMonitor:
    def __init__(
        self, sources: list[Source], faults: FaultInjectionSource, limits: Thresholds, on_alarm
    ):
        self.sources = sources
        self.faults = faults
        self.limits = limits
        self.on_alarm = on_alarm
        self._raised: set[str] = set()
        self._stop = threading.Event()
        self._baseline: dict = {}
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: dict, on_alarm) -> HealthMonitor:
        limits = Thresholds(**config.get("thresholds", {}))
        fault_file = config.get("fault_file") or os.environ.get("YOCO_FAULT_FILE")
        faults = FaultInjectionSource(fault_file)
        sources: list[Source] = [HostSource(), faults]
        nvml = NvmlSource.for_current_device()
        if nvml is not None:
            sources.insert(0, nvml)
        return cls(sources, faults, limits, on_alarm)

    def start(self) -> None:
        # Counters matter when they rise during the job; injected faults are never a baseline.
        self._baseline = {}
        for source in self.sources:
            if source is not self.faults:
                self._baseline.update(source.sample())
        threading.Thread(target=self._run, daemon=True, name="yoco-health").start()

    def stop(self) -> None:
        self._stop.set()

    def inject(self, fault: dict) -> None:
        if fault["kind"] == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        self.faults.inject(fault)
        self.check()

    def check(self) -> None:
        readings: dict = {}
        for source in self.sources:
            readings.update(source.sample())
        for alarm in evaluate(readings, self._baseline, self.limits):
            self._raise(alarm)

    def _raise(self, alarm: Alarm) -> None:
        with self._lock:
            if alarm.category in self._raised:
                return
            self._raised.add(alarm.category)
        self.on_alarm(asdict(alarm))
        if alarm.fatal:
            # The device is gone; this process cannot do useful work. Dying makes it an ordinary
            # unplanned failure, with the alarm's category already on record.
            os.kill(os.getpid(), signal.SIGKILL)

    def _run(self) -> None:
        while not self._stop.wait(self.limits.interval_s):
            self.check()
