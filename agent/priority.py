"""CPU priority of standby spares.

A spare starts at a lower CPU priority (a higher nice value) than the workers, so that its
start-up (interpreter, imports, model build) takes only CPU time the workers leave over. It goes
back to the workers' priority when a failure waits for it (the launcher restores it: `restore`)
or when it is given a rank (it restores itself: `restore_normal`). On Linux the nice value
belongs to each thread, so every thread of the process is restored, and lowering a nice value
needs CAP_SYS_NICE or a high enough RLIMIT_NICE: the launcher lowers a spare's priority only
where it can be restored (`restorable`).
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
from pathlib import Path

SPARE_NICE = 10  # added to the launcher's own nice value
ENV_NORMAL_NICE = "YOCO_NORMAL_NICE"  # the nice value a spare returns to when promoted
CAP_SYS_NICE = 23


def current() -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)


def restorable(normal: int) -> bool:
    """Can an unprivileged process at a higher nice value come back to `normal`?"""
    if _capable(CAP_SYS_NICE):
        return True
    _, hard = resource.getrlimit(resource.RLIMIT_NICE)
    return hard == resource.RLIM_INFINITY or hard >= 20 - normal


def spare_command(command: list[str]) -> tuple[list[str], dict[str, str]]:
    """The command and extra environment that start a spare at a lower priority, or the
    command unchanged where its priority could not be restored (or `nice` is missing)."""
    normal = current()
    nice = shutil.which("nice")
    if nice is None or not restorable(normal):
        return command, {}
    return [nice, "-n", str(SPARE_NICE), *command], {ENV_NORMAL_NICE: str(normal)}


def restore_normal() -> None:
    """In a spare given a rank: bring every thread of this process back to the workers' nice
    value (a no-op for a process started at normal priority). A failure is reported, not
    raised: the rank still trains, only slower under contention."""
    wanted = os.environ.get(ENV_NORMAL_NICE)
    if wanted is None:
        return
    normal = int(wanted)
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NICE)
        if not _capable(CAP_SYS_NICE) and soft != resource.RLIM_INFINITY and soft < 20 - normal:
            resource.setrlimit(resource.RLIMIT_NICE, (hard, hard))
        restore(os.getpid(), normal)
    except (OSError, ValueError) as error:
        print(
            f"yoco agent: could not restore normal CPU priority ({error}); this rank runs at "
            f"nice {current()}",
            file=sys.stderr,
            flush=True,
        )


def restore(pid: int, normal: int) -> None:
    """Set every thread of `pid` whose nice value is above `normal` to `normal`."""
    for tid in _threads(pid):
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) > normal:
                os.setpriority(os.PRIO_PROCESS, tid, normal)
        except ProcessLookupError:  # a thread that just ended
            pass


def thread_nice_values(pid: int) -> list[int]:
    """The nice value of every thread of `pid` (field 19 of /proc/PID/task/TID/stat)."""
    values = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        values.append(int(stat.rsplit(")", 1)[1].split()[16]))
    return values


def _threads(pid: int) -> list[int]:
    try:
        return [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:  # not Linux: the process-wide value is all there is
        return [pid]


def _capable(cap: int) -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> cap & 1)
    except OSError:
        pass
    return os.geteuid() == 0
