"""The coordinator: one job's membership, failure detection, recovery and operator commands.

It owns the TCPStore every process group rendezvouses on and a control port every process keeps
one connection to. Everything it learns (a message, a closed connection, a silent heartbeat, an
operator's drain) arrives in one inbox and is handled by one thread, which hands it to the
module whose job it is:

    agent/membership.py   who is in the job, in which role; deaths, alarms, drains -> failures
    agent/recovery.py     quiesce, move state (live paths, then the checkpoint), resume
    agent/control.py      operators' requests: status, drain, inject
    agent/status_file.py  the status snapshot and the --status-file

This module runs the job: start, the loop that turns failures into recoveries, the end.
"""

from __future__ import annotations

import datetime
import queue
import socket
import threading
import time
from collections.abc import Callable

import torch.distributed as dist

from agent import control
from agent.events import EventFactory
from agent.membership import JobFailed, Member, Membership
from agent.protocol import Channel, ChannelClosed
from agent.recovery import Recovery, replica_stride
from agent.reporter import EventSink
from agent.settings import Settings, control_address, control_server
from agent.spares import SpareSupply
from agent.status_file import STATUS_WRITE_INTERVAL_S, StatusFile, status_document

# STATUS_WRITE_INTERVAL_S: imported from here by tests/agent/stall.py
__all__ = ["STATUS_WRITE_INTERVAL_S", "Coordinator"]


class Coordinator:
    def __init__(
        self,
        settings: Settings,
        sink: EventSink,
        spawn: Callable[[], None] | None = None,
        kill: Callable[[int], None] | None = None,
        spare_supply: SpareSupply | None = None,
        server: socket.socket | None = None,
    ):
        """`spawn()`: start one more (cold) process, when the launcher can; `kill(pid)`: end an
        unresponsive local process; `spare_supply`: starts the local spares once the workers
        train; `server`: the control port's socket, when the launcher bound it already (see
        launcher.run_local_job), else bound here."""
        self.settings = settings
        self.sink = sink
        self.events = EventFactory(settings.cluster, settings.job, settings.mode)
        self.kill = kill
        self.spare_supply = spare_supply
        self.membership = Membership(settings.world_size, spare_supply)
        self.status_file = StatusFile(settings.status_file, self.status)
        self.recovery = Recovery(
            settings,
            self.membership,
            sink,
            self.events,
            wait=self._wait,
            write_status=self.status_file.write,
            spawn=spawn,
        )
        self.inbox: queue.Queue = queue.Queue()
        self.store = dist.TCPStore(
            settings.host,
            settings.store_port,
            is_master=True,
            wait_for_workers=False,
            timeout=datetime.timedelta(seconds=settings.collective_timeout_s),
        )
        self.server = server or control_server(settings)
        self.address = control_address(settings, self.server)
        self.store_address = f"{settings.advertise}:{self.store.port}"
        threading.Thread(target=self._accept, daemon=True, name="yoco-accept").start()

    def status(self) -> dict:
        return status_document(
            generation=self.membership.generation,
            step=self.membership.step,
            address=self.address,
            members=self.membership.members,
            transfer=self.recovery.transfer_in_flight,
            incidents=list(self.recovery.open_incidents.values()),
            spares_pending=self.spare_supply.pending() if self.spare_supply else 0,
        )

    def process_exited(self, pid: int, returncode: int) -> None:
        """Called by a local launcher when one of its processes ends."""
        self.inbox.put(("exited", pid, returncode))

    # -- network ------------------------------------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(Channel(sock),), daemon=True).start()

    def _serve(self, channel: Channel) -> None:
        try:
            first = channel.receive()
        except ChannelClosed:
            return
        if first["type"] != "hello":
            self.inbox.put(("control", channel, first))
            return
        reply: queue.Queue = queue.Queue()
        self.inbox.put(("hello", channel, first, reply))
        member = reply.get()
        if member is None:
            return
        while True:
            try:
                message = channel.receive()
            except ChannelClosed:
                self.inbox.put(("closed", member))
                return
            self.inbox.put(("message", member, message))

    # -- the inbox ----------------------------------------------------------------------------

    def _pump(self, timeout: float) -> None:
        """Handle what arrived within `timeout`, and declare silent processes dead."""
        try:
            self._handle(self.inbox.get(timeout=timeout))
            while True:  # everything already queued, so no heartbeat looks stale
                self._handle(self.inbox.get_nowait())
        except queue.Empty:
            pass
        for member in self.membership.silent(self.settings.heartbeat_timeout_s):
            if self.kill is not None:
                self.kill(member.pid)
        if self.status_file.due():
            self.status_file.write()

    def _handle(self, item: tuple) -> None:
        kind = item[0]
        if kind == "hello":
            _, channel, hello, reply = item
            reply.put(self.membership.admit(channel, hello, self._welcome()))
        elif kind == "closed":
            self.membership.mark_dead(item[1])
        elif kind == "control":
            control.answer(item[1], item[2], self.membership, self.status)
        elif kind == "message":
            _, member, message = item
            self.membership.record(member, message)
            if message["type"] == "started":
                self.recovery.on_started()
        elif kind == "exited":
            self.membership.exited(item[1], item[2])

    def _welcome(self) -> dict:
        """What every joining process is told besides its role and rank."""
        s = self.settings
        return {
            "store": self.store_address,
            "config": {
                "heartbeat_interval_s": s.heartbeat_interval_s,
                "collective_timeout_s": s.collective_timeout_s,
                "transfer_timeout_s": s.transfer_timeout_s,
                "checkpoint_dir": s.checkpoint_dir,
                "checkpoint_every": s.checkpoint_every if s.checkpoint_dir else 0,
                "checkpoint_keep": s.checkpoint_keep,
                "health": s.health,
            },
        }

    def _wait(self, done: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() >= deadline:
                return False
            self._pump(min(0.05, self.settings.heartbeat_interval_s))
        return True

    # -- the job ------------------------------------------------------------------------------

    def run(self) -> str:
        """Run the job to its end; returns the job.finished status."""
        membership = self.membership
        try:
            self._start()
            while True:
                self._pump(self.settings.heartbeat_interval_s)
                workers = membership.workers()
                membership.step = max((m.step for m in workers), default=membership.step)
                supply = self.spare_supply
                if supply is not None and not supply.begun and membership.step >= 1:
                    supply.begin()  # the workers completed their first step
                failures = membership.new_failures()
                if failures:
                    self.recovery.recover(failures)
                elif all(m.report and m.report["type"] == "finished" for m in workers):
                    self._finish()
                    return "completed"
                elif any(m.report and m.report["type"] == "stalled" for m in workers):
                    # A collective failed before we saw why: wait a heartbeat timeout for the
                    # culprit to show itself, then re-form the group with whoever is left.
                    self._wait(lambda: bool(membership.deaths), self.settings.heartbeat_timeout_s)
                    self.recovery.recover(membership.new_failures())
        except JobFailed as error:
            print(f"yoco agent: job failed: {error}", flush=True)
            self.sink.emit(self.events.job_finished("failed", membership.step))
            self._stop_all()
            return "failed"

    def _start(self) -> None:
        s = self.settings
        membership = self.membership

        def all_joined():
            if membership.deaths:
                dead = membership.deaths[0]
                raise JobFailed(
                    f"{membership.describe(dead)} exited before the job started; see its output "
                    "above"
                )
            workers = membership.workers()
            return len(workers) == s.world_size and all(m.ready for m in workers)

        if not self._wait(all_joined, s.join_timeout_s):
            joined = len(membership.workers())
            raise JobFailed(
                f"world size {s.world_size} cannot be filled: {joined} of {s.world_size} workers "
                f"joined within {s.join_timeout_s:g} s"
            )
        supply = self.spare_supply
        if supply is not None and supply.holds_first_step:
            print("yoco agent: the first step waits for every spare to be ready", flush=True)
            if not self._wait(lambda: not supply.coming(), s.join_timeout_s):
                raise JobFailed(
                    f"{supply.pending()} spare(s) not ready within {s.join_timeout_s:g} s "
                    "(--spares-start before-training waits for every one)"
                )
        if s.await_spares:
            print(
                f"yoco agent: the first step waits for {s.await_spares} ready spare(s)", flush=True
            )
            if not self._wait(lambda: len(membership.spares()) >= s.await_spares, s.join_timeout_s):
                raise JobFailed(
                    f"{len(membership.spares())} of {s.await_spares} spare(s) ready within "
                    f"{s.join_timeout_s:g} s (--await-spares)"
                )
        workers = membership.workers()
        # Room for per-rank state to grow (data iterators, extra RNGs) without resizing.
        self.recovery.slot_bytes = 2 * max(m.state_bytes for m in workers) // 1000 + 64 * 1024
        # A sharded job's mesh (Run.device_mesh), else every rank a full replica.
        parallelism = workers[0].parallelism or {"dp_replicate": s.world_size}
        self.recovery.replica_stride = replica_stride(parallelism, s.world_size)
        self.sink.emit(
            self.events.job_started(
                s.world_size,
                s.model,
                _gpus(workers),
                spares=_standby_spares(membership.members, self.spare_supply),
                parallelism=parallelism,
                extra=_protection(workers),
            )
        )
        self.recovery.resume_all({m.rank: "none" for m in workers}, step=0)

    def _finish(self) -> None:
        self.recovery.finish()
        for member in self.membership.workers():
            self.membership.send(member, {"type": "done"})
        self._stop_all()
        self.sink.emit(self.events.job_finished("completed", self.membership.step))

    def _stop_all(self) -> None:
        for member in self.membership.members:
            if member.role in ("spare", "receiving"):
                self.membership.send(member, {"type": "retire"})
        self.status_file.write()


def _protection(workers: list[Member]) -> dict | None:
    """Transparent mode: is every rank's state fully captured, and if not, what is missing."""
    reports = [m.protection for m in workers if m.protection]
    if not reports:
        return None
    unprotected = sorted({name for r in reports for name in r["unprotected"]})
    return {"protected": not unprotected, "unprotected": unprotected}


def _standby_spares(members: list[Member], supply: SpareSupply | None) -> int:
    """The spares at the start: those that joined, and the local ones still on their way. A
    local spare that joined but is not ready yet is both, and counts once."""
    joined = [m for m in members if m.role == "spare"]
    if supply is None:
        return len(joined)
    return sum(1 for m in joined if m.pid not in supply.loading) + supply.pending()


def _gpus(workers: list[Member]) -> int:
    return sum(1 for m in workers if m.device.startswith("cuda"))
