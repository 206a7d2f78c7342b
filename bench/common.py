"""Shared by the benchmarks: where results go and what machine made them."""

import json
import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(memory_gib, 1),
        "python": platform.python_version(),
        "os": platform.platform(),
    }


def _commit() -> str:
    try:  # a checkout copied without .git, or a host without git
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return ""


def write_result(name: str, figures: dict) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    document = {
        **figures,
        "machine": machine(),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_commit": _commit(),
    }
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path
