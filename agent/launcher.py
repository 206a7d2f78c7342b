"""Starts the training processes of one node and watches them.

`yoco-agent run` on a single machine: this launcher starts the coordinator in-process and N
workers; the S spares start once the workers train, one at a time and at a lower CPU priority
(agent/spares.py, agent/priority.py). On several machines each node runs a launcher pointed at
one coordinator (see docs/agent.md); which process becomes which rank is the coordinator's
choice.

Where the operator's command line (typer, rich) is not installed, e.g. a GPU host with only
torch, the same local job runs from a checkout with this module alone:

    PYTHONPATH=. python3 -m agent.launcher --workers 2 --spares 1 --events ev.jsonl -- \
        python3 agent/examples/gpt.py --steps 100
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from agent import priority
from agent.settings import control_address, control_server
from agent.spares import WHEN, SpareSupply


def kill_listed_processes(status_file: str | os.PathLike) -> None:
    """SIGKILL every process a job's `--status-file` names. Workers and spares run in sessions
    of their own, so killing the launcher's group alone would leave them running."""
    try:
        members = json.loads(Path(status_file).read_text()).get("members", [])
    except (OSError, json.JSONDecodeError):
        return
    for member in members:
        try:
            os.killpg(member["pid"], signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def transparent_command(command: list[str]) -> list[str]:
    """`python train.py ...` -> `python -m agent.transparent train.py ...` (transparent mode)."""
    if len(command) >= 2 and os.path.basename(command[0]).startswith("python"):
        if command[1] == "-m":
            raise ValueError("transparent mode runs a script file: python train.py ...")
        return [command[0], "-m", "agent.transparent", *command[1:]]
    if command and command[0].endswith(".py"):
        return [sys.executable, "-m", "agent.transparent", *command]
    raise ValueError(
        "transparent mode runs a Python script: yoco-agent run --transparent -- python train.py"
    )


class LocalProcesses:
    def __init__(self, command: list[str], coordinator: str, node: str | None = None):
        """`coordinator`: the control port's address the processes dial."""
        if not command:
            raise ValueError("no training command given: yoco-agent run ... -- python train.py")
        self.command = command
        self.coordinator = coordinator
        # YOCO_NODE names the node where the host name does not (a pod's is its own name).
        self.node = node or os.environ.get("YOCO_NODE") or socket.gethostname()
        self.processes: list[subprocess.Popen] = []
        self._on_exit: Callable[[int, int], None] | None = None
        self._exited: list[tuple[int, int]] = []  # before anyone watched (watch_exits)
        self._lock = threading.Lock()

    def start(self) -> subprocess.Popen:
        return self._start(self.command, {})

    def start_spare(self) -> int:
        """Start a standby spare at a lower CPU priority; returns its pid."""
        command, env = priority.spare_command(self.command)
        return self._start(command, env).pid

    def hurry(self, pid: int) -> None:
        """Give a spare still starting the workers' CPU priority (a failure waits for it)."""
        try:
            priority.restore(pid, priority.current())
        except OSError as error:
            print(f"yoco agent: could not raise spare {pid}'s priority: {error}", flush=True)

    def _start(self, command: list[str], extra_env: dict[str, str]) -> subprocess.Popen:
        with self._lock:
            index = len(self.processes)
            env = dict(os.environ)
            env.update(
                YOCO_COORDINATOR=self.coordinator,
                YOCO_LOCAL_INDEX=str(index),
                YOCO_NODE=self.node,
                **extra_env,
            )
            # Own session: kill() can then end a process and anything it started.
            process = subprocess.Popen(command, env=env, start_new_session=True)
            self.processes.append(process)
        threading.Thread(target=self._watch, args=(process,), daemon=True).start()
        return process

    def watch_exits(self, on_exit: Callable[[int, int], None]) -> None:
        """Call `on_exit(pid, returncode)` for every process that ends, those that already
        have included."""
        with self._lock:
            self._on_exit, exited = on_exit, self._exited
            self._exited = []
        for pid, code in exited:
            on_exit(pid, code)

    def _watch(self, process: subprocess.Popen) -> None:
        code = process.wait()
        with self._lock:
            on_exit = self._on_exit
            if on_exit is None:
                self._exited.append((process.pid, code))
        if on_exit is not None:
            on_exit(process.pid, code)

    def kill(self, pid: int) -> None:
        with self._lock:
            ours = any(p.pid == pid for p in self.processes)
        if ours:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def wait_all(self, timeout_s: float, pids: set[int] | None = None) -> None:
        """Let the processes `pids` (default all) finish (workers save their results after
        the loop), then end any that are left (e.g. a spare still starting)."""
        deadline = time.monotonic() + timeout_s
        for process in list(self.processes):
            if pids is not None and process.pid not in pids:
                continue
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        self.stop_all()

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                print(f"yoco agent: ending process {process.pid}", file=sys.stderr, flush=True)
                self.kill(process.pid)
        for process in self.processes:
            process.wait()


def run_local_job(
    settings,
    sink,
    command: list[str],
    workers: int,
    spares: int,
    respawn: bool,
    spares_start: str = WHEN[0],
) -> str:
    """`yoco-agent run` (and `coordinator`, with no command): a coordinator in this process,
    `workers` local processes running `command` and `spares` standby ones (started as
    `spares_start` says: agent/spares.py), until the job ends; its job.finished status. Needs
    only torch and the standard library, like everything a job runs."""
    # The workers start before this process imports torch (the coordinator does): on a machine
    # with few cores their own start-up overlaps it, and the first step comes sooner. All they
    # need is the control port's address, bound here.
    server = control_server(settings)
    local = LocalProcesses(command, control_address(settings, server)) if command else None
    if local is not None:
        for _ in range(workers):
            local.start()

    from agent.coordinator import Coordinator

    supply = SpareSupply(local.start_spare, spares, local.hurry, spares_start) if local else None
    coordinator = Coordinator(
        settings,
        sink,
        spawn=local.start if (local and respawn) else None,
        kill=local.kill if local else None,
        spare_supply=supply if spares else None,
        server=server,
    )
    print(f"yoco agent: coordinator at {coordinator.address}", flush=True)
    if local is not None:
        local.watch_exits(coordinator.process_exited)
        supply.launch()
    status = "failed"
    try:
        status = coordinator.run()
    finally:
        if local is not None and status == "completed":
            # Workers may still be saving their results; spares (one may still be starting)
            # have nothing to finish.
            ranks = {m["pid"] for m in coordinator.status()["members"] if m["role"] == "worker"}
            local.wait_all(timeout_s=60, pids=ranks)
        elif local is not None:
            local.stop_all()
        sink.close()
    print(f"yoco agent: job {status}", flush=True)
    return status


def main(argv: list[str] | None = None) -> int:
    """A local job with the standard library alone: the options of `yoco-agent run` a job
    needs to run and be observed; events go to a JSONL file."""
    from agent.reporter import JsonlSink
    from agent.settings import Settings

    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(
        prog="python -m agent.launcher",
        description=main.__doc__,
        usage="%(prog)s [OPTIONS] -- COMMAND",
    )
    parser.add_argument("--workers", type=int, default=1, help="world size")
    parser.add_argument("--spares", type=int, default=0, help="standby processes")
    parser.add_argument(
        "--spares-start", choices=WHEN, default=WHEN[0], help="when spares start (agent/spares.py)"
    )
    parser.add_argument("--events", default="yoco-events.jsonl", help="JSONL event log")
    parser.add_argument("--status-file", help="JSON snapshot of the job, kept current")
    parser.add_argument("--cluster", default="local")
    parser.add_argument("--job", default=f"job-{os.getpid()}")
    parser.add_argument("--heartbeat-timeout", type=float, default=1.0, help="seconds")
    parser.add_argument("--join-timeout", type=float, default=60.0, help="seconds")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    settings = Settings(
        world_size=args.workers,
        host="127.0.0.1",
        cluster=args.cluster,
        job=args.job,
        heartbeat_timeout_s=args.heartbeat_timeout,
        join_timeout_s=args.join_timeout,
        status_file=args.status_file,
    )
    outcome = run_local_job(
        settings,
        JsonlSink(args.events),
        command,
        args.workers,
        args.spares,
        respawn=True,
        spares_start=args.spares_start,
    )
    return 0 if outcome == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
