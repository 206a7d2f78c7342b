"""The coordinator: membership, failure detection, and the migrations that follow.

It owns the TCPStore every process group rendezvouses on and a control port every process keeps
one connection to. Everything it learns (a message, a closed connection, a silent heartbeat, an
operator's drain) arrives in one inbox and is handled by one thread, so the recovery procedure
reads top to bottom:

    detect  ->  quiesce (abort the step in flight, or pause at the next boundary)
            ->  stream state: spare <- the worker itself or a replica, per-rank state from a mirror
            ->  re-form the group at the same world size and rank order  ->  resume

and falls back to the newest checkpoint when no live copy or no spare is left.
"""

from __future__ import annotations

import datetime
import itertools
import json
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

import torch.distributed as dist

from agent import checkpoint
from agent.advice import NO_LIVE_COPY, NO_SPARE, has_checkpoint_fallback, no_live_recovery
from agent.devices import group_backend
from agent.events import EventFactory, new_incident_id
from agent.protocol import Channel, ChannelClosed
from agent.reporter import EventSink
from agent.spares import SpareSupply

# Reports a quiesced worker sends; each says "I am at a step boundary, waiting for orders".
QUIESCED = {"stalled", "paused", "finished"}
STATUS_WRITE_INTERVAL_S = 0.2  # the --status-file is rewritten at most this often


class JobFailed(RuntimeError):
    pass


class NoLiveRecovery(Exception):
    """No live copy of some state, or no spare that can take it: only a checkpoint can help."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class Settings:
    world_size: int
    host: str = "0.0.0.0"
    advertise: str = "127.0.0.1"  # the address processes use to reach us
    port: int = 0
    store_port: int = 0
    cluster: str = "local"
    job: str = "job"
    model: str = ""
    heartbeat_interval_s: float = 0.1
    heartbeat_timeout_s: float = 1.0  # a silent process is declared dead after this
    join_timeout_s: float = 60.0
    collective_timeout_s: float = 30.0
    transfer_timeout_s: float = 120.0
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0
    checkpoint_keep: int = 2
    health: dict = field(default_factory=dict)
    status_file: str | None = None
    mode: str = "model_aware"  # or "transparent" (agent/transparent.py)


@dataclass
class Member:
    id: int
    channel: Channel
    pid: int
    node: str
    device: str
    role: str  # worker | spare | retired | dead
    rank: int | None = None
    step: int = 0
    last_seen: float = field(default_factory=time.monotonic)
    ready: bool = False
    state_bytes: int = 0
    report: dict | None = None  # the last quiesced report in a recovery
    replies: dict = field(default_factory=dict)  # transfer id -> "sent"/"loaded" reply
    fatal_alarm: dict | None = None
    protection: dict | None = None  # transparent mode: what its capture covers
    last_alarm: dict | None = None  # the newest health alarm (for `yoco-agent status`)
    started: dict | None = None  # its last "started" report (first step of a generation)

    @property
    def alive(self) -> bool:
        return self.role not in ("dead", "retired")


@dataclass
class Failure:
    """One incident: a rank that must get a new home."""

    rank: int
    member: Member
    trigger: str
    category: str
    detail: str
    xid: int | None = None
    incident: str = field(default_factory=new_incident_id)
    detected: float = field(default_factory=time.monotonic)
    target: Member | None = None
    nbytes: int = 0
    transfer_ms: float = 0.0
    tried: set[int] = field(default_factory=set)  # spares (member ids) that failed to take it
    receive_error: str | None = None  # the last spare's error receiving the state
    stays: bool = False  # a degrading worker no spare could take over: it trains on
    resume_step: int = 0
    completion: dict | None = None  # migration.completed's fields, sent once training runs


class Coordinator:
    def __init__(
        self,
        settings: Settings,
        sink: EventSink,
        spawn: Callable[[], None] | None = None,
        kill: Callable[[int], None] | None = None,
        spare_supply: SpareSupply | None = None,
    ):
        self.settings = settings
        self.sink = sink
        self.events = EventFactory(settings.cluster, settings.job, settings.mode)
        self.spawn = spawn  # start one more (cold) process, when the launcher can
        self.kill = kill  # end an unresponsive local process
        self.spare_supply = spare_supply  # starts the local spares once the workers train
        self.members: list[Member] = []
        self.inbox: queue.Queue = queue.Queue()
        self.generation = 0
        self.step = 0
        self.slot_bytes = 0
        self.transfer_ids = itertools.count()
        self._ids = itertools.count()
        self._deaths: list[Member] = []
        self._alarms: list[tuple[Member, dict]] = []
        self._drains: list[int] = []
        self._transfer_in_flight: dict | None = None
        self._status_written = 0.0
        self._open_incidents: dict[str, dict] = {}  # detected, not yet resumed (for status)
        self._awaiting_start: list[Failure] = []  # recovered, until every rank starts a step
        self.store = dist.TCPStore(
            settings.host,
            settings.store_port,
            is_master=True,
            wait_for_workers=False,
            timeout=datetime.timedelta(seconds=settings.collective_timeout_s),
        )
        self.server = socket.create_server((settings.host, settings.port), backlog=256)
        self.address = f"{settings.advertise}:{self.server.getsockname()[1]}"
        self.store_address = f"{settings.advertise}:{self.store.port}"
        threading.Thread(target=self._accept, daemon=True, name="yoco-accept").start()

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

    def _send(self, member: Member, message: dict) -> None:
        try:
            member.channel.send(message)
        except ChannelClosed:
            self._mark_dead(member)

    # -- the inbox ----------------------------------------------------------------------------

    def _pump(self, timeout: float) -> None:
        """Handle what arrived within `timeout`, and declare silent processes dead."""
        try:
            self._handle(self.inbox.get(timeout=timeout))
            while True:  # everything already queued, so no heartbeat looks stale
                self._handle(self.inbox.get_nowait())
        except queue.Empty:
            pass
        now = time.monotonic()
        for member in self.members:
            # A process still building its model is judged by its connection alone.
            silent = now - member.last_seen > self.settings.heartbeat_timeout_s
            if member.alive and member.ready and silent:
                print(f"yoco agent: no heartbeat from {self._describe(member)}", flush=True)
                self._mark_dead(member)
                if self.kill is not None:
                    self.kill(member.pid)
        if now - self._status_written > STATUS_WRITE_INTERVAL_S:
            self._write_status()

    def _handle(self, item: tuple) -> None:
        kind = item[0]
        if kind == "hello":
            _, channel, hello, reply = item
            reply.put(self._admit(channel, hello))
        elif kind == "closed":
            self._mark_dead(item[1])
        elif kind == "control":
            self._control(item[1], item[2])
        elif kind == "message":
            _, member, message = item
            member.last_seen = time.monotonic()
            self._message(member, message)
        elif kind == "exited":
            self._exited(item[1], item[2])

    def _admit(self, channel: Channel, hello: dict) -> Member | None:
        workers = {m.rank for m in self.members if m.role == "worker"}
        free = [r for r in range(self.settings.world_size) if r not in workers]
        started = self.generation > 0
        role = "worker" if free and not started else "spare"
        member = Member(
            next(self._ids), channel, hello["pid"], hello["node"], hello["device"], role
        )
        if role == "worker":
            member.rank = free[0]
        self.members.append(member)
        self._send(
            member,
            {
                "type": "welcome",
                "role": role,
                "rank": member.rank,
                "world_size": self.settings.world_size,
                "store": self.store_address,
                "config": self._worker_config(),
            },
        )
        return member

    def _worker_config(self) -> dict:
        s = self.settings
        return {
            "heartbeat_interval_s": s.heartbeat_interval_s,
            "collective_timeout_s": s.collective_timeout_s,
            "transfer_timeout_s": s.transfer_timeout_s,
            "checkpoint_dir": s.checkpoint_dir,
            "checkpoint_every": s.checkpoint_every if s.checkpoint_dir else 0,
            "checkpoint_keep": s.checkpoint_keep,
            "health": s.health,
        }

    def _message(self, member: Member, message: dict) -> None:
        kind = message["type"]
        if kind == "heartbeat":
            member.step = message["step"]
        elif kind == "ready":
            member.ready = True
            if self.spare_supply is not None:
                self.spare_supply.ready(member.pid)
            member.state_bytes = message["state_bytes"]
            if "protected" in message:
                member.protection = {
                    "protected": message["protected"],
                    "unprotected": message["unprotected"],
                }
        elif kind in QUIESCED:
            member.step = message["step"]
            member.state_bytes = message["state_bytes"]
            member.report = message
        elif kind in ("sent", "loaded"):
            member.replies[message["transfer"]] = message
        elif kind == "resumed":
            member.report = message
        elif kind == "started":
            member.started = {**message, "at": time.monotonic()}
            self._settle_started()
        elif kind == "alarm":
            member.last_alarm = message
            if message["fatal"]:
                member.fatal_alarm = message
            else:
                self._alarms.append((member, message))
        elif kind == "fatal":
            raise JobFailed(f"{self._describe(member)}: {message['message']}")

    def process_exited(self, pid: int, returncode: int) -> None:
        """Called by a local launcher when one of its processes ends."""
        self.inbox.put(("exited", pid, returncode))

    def _exited(self, pid: int, returncode: int) -> None:
        if self.spare_supply is not None:
            self.spare_supply.gone(pid)
        if any(m.pid == pid for m in self.members):
            return  # its closed connection already told us
        if self.generation == 0:
            raise JobFailed(
                f"process {pid} exited with code {returncode} before joining the agent; did the "
                "training script call agent.attach()? (see its output above)"
            )
        print(f"yoco agent: process {pid} exited with code {returncode} before joining", flush=True)

    def _mark_dead(self, member: Member) -> None:
        if not member.alive:
            return
        was = member.role
        member.role = "dead"
        member.channel.close()
        if was == "worker":
            self._deaths.append(member)

    def _describe(self, member: Member) -> str:
        who = f"rank {member.rank}" if member.rank is not None else "a spare"
        return f"{who} (pid {member.pid} on {member.node})"

    # -- operators' commands ------------------------------------------------------------------

    def _control(self, channel: Channel, request: dict) -> None:
        kind = request["type"]
        try:
            if kind == "status":
                reply = {"ok": True, **self.status()}
            elif kind == "drain":
                ranks = self._ranks_for(request)
                for rank in ranks:
                    self._drains.append(rank)
                reply = {"ok": True, "ranks": ranks}
            elif kind == "inject":
                (rank,) = self._ranks_for(request)
                worker = self._worker(rank)
                fault = {"kind": request["kind"], "xid": request.get("xid")}
                self._send(worker, {"type": "inject", "fault": fault})
                reply = {"ok": True, "rank": rank, "pid": worker.pid}
            else:
                reply = {"ok": False, "error": f"unknown request {kind!r}"}
        except (LookupError, ValueError) as error:
            reply = {"ok": False, "error": str(error)}
        try:
            channel.send(reply)
        except ChannelClosed:
            pass
        channel.close()

    def _ranks_for(self, request: dict) -> list[int]:
        if request.get("rank") is not None:
            rank = int(request["rank"])
            self._worker(rank)
            return [rank]
        node = request.get("node")
        ranks = sorted(m.rank for m in self.members if m.role == "worker" and m.node == node)
        if not ranks:
            raise LookupError(f"no worker on node {node!r}")
        return ranks

    def _worker(self, rank: int) -> Member:
        for member in self.members:
            if member.role == "worker" and member.rank == rank:
                return member
        raise LookupError(f"no live worker has rank {rank}")

    def status(self) -> dict:
        return {
            "generation": self.generation,
            "step": self.step,
            "address": self.address,
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
                for m in self.members
            ],
            "transfer": self._transfer_in_flight,
            "incidents": list(self._open_incidents.values()),
            # Local spares not started or still loading (agent/spares.py).
            "spares_pending": self.spare_supply.pending() if self.spare_supply else 0,
        }

    def _write_status(self) -> None:
        self._status_written = time.monotonic()
        if not self.settings.status_file:
            return
        path = Path(self.settings.status_file)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.status()))
        os.replace(tmp, path)

    # -- the job ------------------------------------------------------------------------------

    def run(self) -> str:
        """Run the job to its end; returns the job.finished status."""
        try:
            self._start()
            while True:
                self._pump(self.settings.heartbeat_interval_s)
                workers = self._workers()
                self.step = max((m.step for m in workers), default=self.step)
                failures = self._new_failures()
                if failures:
                    self._recover(failures)
                elif all(m.report and m.report["type"] == "finished" for m in workers):
                    self._finish()
                    return "completed"
                elif any(m.report and m.report["type"] == "stalled" for m in workers):
                    # A collective failed before we saw why: wait a heartbeat timeout for the
                    # culprit to show itself, then re-form the group with whoever is left.
                    self._wait(lambda: bool(self._deaths), self.settings.heartbeat_timeout_s)
                    self._recover(self._new_failures())
        except JobFailed as error:
            print(f"yoco agent: job failed: {error}", flush=True)
            self.sink.emit(self.events.job_finished("failed", self.step))
            self._stop_all()
            return "failed"

    def _workers(self) -> list[Member]:
        return sorted((m for m in self.members if m.role == "worker"), key=lambda m: m.rank)

    def _spares(self) -> list[Member]:
        return [m for m in self.members if m.role == "spare" and m.ready]

    def _spare_coming(self) -> bool:
        return self.spare_supply is not None and self.spare_supply.coming()

    def _ready_spare(self, tried: Collection[int] = ()) -> Member | None:
        """A ready spare not in `tried` (ids); when none is, but one is still starting, wait
        for it (at most the join timeout): a failure soon after the job started finds the
        spares still loading."""

        def untried() -> list[Member]:
            return [s for s in self._spares() if s.id not in tried]

        if not untried() and self._spare_coming():
            print("yoco agent: no spare ready yet; waiting for one to finish starting", flush=True)
            self.spare_supply.hurry()
            self._wait(
                lambda: bool(untried()) or not self._spare_coming(), self.settings.join_timeout_s
            )
        return next(iter(untried()), None)

    def _wait(self, done: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() >= deadline:
                return False
            self._pump(min(0.05, self.settings.heartbeat_interval_s))
        return True

    def _start(self) -> None:
        s = self.settings

        def all_joined():
            if self._deaths:
                dead = self._deaths[0]
                raise JobFailed(
                    f"{self._describe(dead)} exited before the job started; see its output above"
                )
            workers = self._workers()
            return len(workers) == s.world_size and all(m.ready for m in workers)

        if not self._wait(all_joined, s.join_timeout_s):
            joined = len(self._workers())
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
        # Room for per-rank state to grow (data iterators, extra RNGs) without resizing.
        self.slot_bytes = 2 * max(m.state_bytes for m in self._workers()) // 1000 + 64 * 1024
        self.sink.emit(
            self.events.job_started(
                s.world_size,
                s.model,
                _gpus(self._workers()),
                spares=sum(1 for m in self.members if m.role == "spare")
                + (self.spare_supply.pending() if self.spare_supply else 0),
                parallelism={"dp_replicate": s.world_size},  # every rank a full replica
                extra=_protection(self._workers()),
            )
        )
        self._resume_all({m.rank: "none" for m in self._workers()}, step=0)
        if self.spare_supply is not None:
            self.spare_supply.begin()  # the workers are on their first step

    def _new_failures(self, claimed: int = 0) -> list[Failure]:
        """Failures not yet being handled; `claimed`: spares the recovery in progress still
        needs."""
        failures = []
        for dead in self._deaths:
            alarm = dead.fatal_alarm or {}
            failures.append(
                Failure(
                    dead.rank,
                    dead,
                    "unplanned",
                    alarm.get("category", "node_crash"),
                    alarm.get("detail", "worker process died (connection lost)"),
                    alarm.get("xid"),
                )
            )
        self._deaths.clear()
        # A degrading worker still trains: it moves only to a spare no death needs, so alarms
        # (the same one on every rank at once, say) can never leave a rank without a home.
        free = len(self._spares()) - claimed - len(failures)
        waiting = []  # alarms that wait for a spare still starting
        for member, alarm in self._alarms:
            if member.role != "worker" or member.rank in {f.rank for f in failures}:
                continue
            if free <= 0 and self._spare_coming():
                waiting.append((member, alarm))  # moved once the spare starting is ready
                continue
            if free <= 0:
                print(
                    f"yoco agent: {alarm['detail']} on rank {member.rank}; no free spare to move "
                    "it to, so it keeps training",
                    flush=True,
                )
                continue
            free -= 1
            failures.append(
                Failure(
                    member.rank,
                    member,
                    "preemptive",
                    alarm["category"],
                    alarm["detail"],
                    alarm.get("xid"),
                )
            )
        self._alarms = waiting
        for rank in self._drains:
            try:
                member = self._worker(rank)
            except LookupError:  # already moved or gone
                continue
            failures.append(Failure(rank, member, "planned", "maintenance", "drained by operator"))
        self._drains.clear()
        taken = set()
        unique = []
        for failure in failures:
            if failure.rank not in taken:
                taken.add(failure.rank)
                unique.append(failure)
        return unique

    # -- recovery -----------------------------------------------------------------------------

    def _recover(self, failures: list[Failure]) -> None:
        for failure in failures:
            self._emit_detected(failure)
        live = self._quiesce(failures)
        resume_step = max(m.report["step"] for m in live) if live else None
        try:
            restore = self._migrate(failures, live, resume_step)
        except NoLiveRecovery as impossible:
            self._checkpoint_fallback(failures, resume_step, impossible.reason)
            return
        moved = [f for f in failures if not f.stays]
        for failure in moved:
            if failure.member.alive:  # the drained or degrading worker itself
                failure.member.role = "retired"
                self._send(failure.member, {"type": "retire"})
            failure.target.role = "worker"
            failure.target.rank = failure.rank
        recompute_ms = max((m.report.get("recompute_ms", 0) for m in live), default=0)
        if not self._resume_all(restore, resume_step):
            self._recover_again(moved)
            return
        self._report_live(moved, resume_step, recompute_ms)
        self._await_start([f for f in failures if f.stays], resume_step)

    def _report_live(self, failures: list[Failure], resume_step: int, recompute_ms: float) -> None:
        now = time.monotonic()
        for failure in failures:
            failure.completion = {
                "duration_ms": (now - failure.detected) * 1000,
                "nbytes": failure.nbytes,
                "recompute_ms": recompute_ms if failure.trigger == "unplanned" else 0,
                "resumed_step": resume_step,
            }
        self._await_start(failures, resume_step)

    def _await_start(self, failures: list[Failure], step: int) -> None:
        """The recovery of `failures` is over once every rank has started its first step after
        it (SPEC 2.3): until then their migration.completed and job.resumed wait."""
        for failure in failures:
            failure.resume_step = step
        self._awaiting_start += failures
        self._settle_started()

    def _settle_started(self) -> None:
        workers = self._workers()
        starts = [m.started for m in workers]
        if not self._awaiting_start or not workers:
            return
        if any(s is None or s["generation"] != self.generation for s in starts):
            return
        self._report_running(max(s["at"] for s in starts))

    def _report_running(self, at: float) -> None:
        """Training runs again since `at`: close every recovered incident. A completed step whose
        compute the target ran again to get there is a step lost."""
        awaiting, self._awaiting_start = self._awaiting_start, []
        for failure in awaiting:
            if failure.completion is not None:
                started = failure.target.started or {}
                self.sink.emit(
                    self.events.migration_completed(
                        failure.incident,
                        steps_lost=started.get("steps_rerun", 0),
                        **failure.completion,
                    )
                )
            downtime_ms = (at - failure.detected) * 1000
            self._open_incidents.pop(failure.incident, None)
            self.sink.emit(
                self.events.job_resumed(
                    failure.incident, step=failure.resume_step, downtime_ms=downtime_ms
                )
            )

    def _emit_detected(self, failure: Failure) -> None:
        member = failure.member
        self._open_incidents[failure.incident] = {
            "incident": failure.incident,
            "rank": failure.rank,
            "trigger": failure.trigger,
            "category": failure.category,
            "detail": failure.detail,
        }
        self.sink.emit(
            self.events.failure_detected(
                failure.incident,
                trigger=failure.trigger,
                category=failure.category,
                rank=failure.rank,
                node=member.node,
                device=member.device,
                step=member.step,
                xid=failure.xid,
                detail=failure.detail,
            )
        )

    def _quiesce(self, failures: list[Failure]) -> list[Member]:
        """Bring every live worker to a step boundary and learn its step. An unplanned failure
        aborts the step in flight; planned and pre-emptive ones pause at the next boundary, so
        the leaving worker can hand over its own state."""
        unplanned = any(f.trigger == "unplanned" for f in failures)
        workers = self._workers()
        for member in workers:
            if not (member.report and member.report["type"] in QUIESCED):
                member.report = None
            self._send(member, {"type": "abort" if unplanned else "pause"})
        aborted = unplanned

        def quiet():
            nonlocal aborted
            if self._deaths and not aborted:
                aborted = True
                for member in self._workers():
                    self._send(member, {"type": "abort"})
            return all(m.report for m in self._workers())

        if not self._wait(quiet, self.settings.collective_timeout_s):
            silent = [m for m in self._workers() if not m.report]
            for member in silent:
                self._mark_dead(member)
        self._absorb_new_failures(failures, [])
        return self._workers()

    def _migrate(self, failures: list[Failure], live: list[Member], step: int | None):
        """Give every failed rank a spare holding its state at `step`, and bring laggards (a
        survivor that missed the last update while others applied it) up to `step`. Returns
        how each rank restores its per-rank state; raises NoLiveRecovery when only a checkpoint
        can help."""
        restore = {m.rank: "own" for m in live if m.rank not in {f.rank for f in failures}}
        if step is None:
            raise NoLiveRecovery(NO_LIVE_COPY)
        pending = list(failures)
        while pending:
            failure = pending.pop(0)
            source, state_source = self._pick_source(failure, step, failures)
            spare = self._ready_spare(failure.tried) if source is not None else None
            if source is None or spare is None:
                reason = NO_LIVE_COPY if source is None else self._no_spare(failure)
                self._give_up(failure, reason, restore)
                continue
            self.sink.emit(
                self.events.migration_started(
                    failure.incident,
                    state_source=state_source,
                    source={"node": source.node, "rank": source.rank},
                    target={"node": spare.node},
                    nbytes=source.state_bytes,
                )
            )
            spare.role = "receiving"
            reply = self._transfer(source, spare, failure.rank)
            if reply["ok"]:
                failure.target, failure.nbytes = spare, reply["bytes"]
                failure.transfer_ms = reply["duration_ms"]
                restore[failure.rank] = "received"
                continue
            if spare.role == "receiving":
                spare.role = "spare"
            if reply["side"] == "target":
                failure.tried.add(spare.id)
                if reply["error"] == failure.receive_error:
                    # The same error on a second spare, on the same state: it would fail on
                    # every spare. Stop before the pool is burned.
                    reason = (
                        f"{reply['reason']}; a second spare failed the same way receiving the "
                        f"state of step {step}, so no further spare is tried"
                    )
                    self._give_up(failure, reason, restore)
                    continue
                failure.receive_error = reply["error"]
            self.sink.emit(self.events.migration_failed(failure.incident, reply["reason"]))
            self._absorb_new_failures(failures, pending)
            pending.insert(0, failure)
        for laggard in [m for m in self._workers() if m.report["step"] < step]:
            source, _ = self._pick_source(Failure(laggard.rank, laggard, "", "", ""), step, [])
            reply = self._transfer(source, laggard, laggard.rank)
            if not reply["ok"]:
                self._absorb_new_failures(failures, [])
                return self._migrate(failures, self._workers(), step)
            restore[laggard.rank] = "received"
        return restore

    def _give_up(self, failure: Failure, reason: str, restore: dict[int, str]) -> None:
        """No spare can take this rank's state. A degrading worker is still alive and holds
        it, so it trains on where it is; anyone else needs the checkpoint (NoLiveRecovery)."""
        if failure.trigger == "preemptive" and failure.member.alive:
            reason += f"; rank {failure.rank} keeps training on its device"
            print(f"yoco agent: {reason}", flush=True)
            failure.stays = True
            restore[failure.rank] = "own"
        self.sink.emit(self.events.migration_failed(failure.incident, reason))
        if not failure.stays:
            raise NoLiveRecovery(reason)

    def _no_spare(self, failure: Failure) -> str:
        if failure.receive_error is None:
            return NO_SPARE
        return (
            f"{NO_SPARE} (every spare failed to receive the state; the last: "
            f"{failure.receive_error})"
        )

    def _absorb_new_failures(self, failures: list[Failure], pending: list[Failure]) -> None:
        """Deaths during a recovery. A leaving worker that dies is still its own incident (its
        state now comes from a replica); anyone else is a new incident."""
        known = {f.rank for f in failures}
        claimed = sum(1 for f in failures if f.target is None and not f.stays)
        for failure in self._new_failures(claimed):
            if failure.rank in known:
                continue
            self._emit_detected(failure)
            failures.append(failure)
            pending.append(failure)

    def _pick_source(self, failure: Failure, step: int, failures: list[Failure]):
        leaving = failure.member
        if leaving.alive and failure.trigger != "unplanned" and leaving.report["step"] == step:
            return leaving, "self"
        replaced = {f.rank for f in failures}
        replicas = [
            m
            for m in self._workers()
            if m.rank not in replaced and m.report and m.report["step"] == step
        ]
        if not replicas:
            return None, None
        # The buddy (next rank) first: spreads the load when several ranks fail at once.
        n = self.settings.world_size
        replicas.sort(key=lambda m: (m.rank - failure.rank) % n)
        return replicas[0], "replica"

    def _transfer(self, source: Member, target: Member, for_rank: int) -> dict:
        transfer = f"{self.generation}.{next(self.transfer_ids)}"
        self._transfer_in_flight = {
            "id": transfer,
            "source_pid": source.pid,
            "target_pid": target.pid,
            "rank": for_rank,
        }
        self._write_status()
        self._send(source, {"type": "send_state", "transfer": transfer, "for_rank": for_rank})
        self._send(target, {"type": "recv_state", "transfer": transfer})

        def settled(member):
            return not member.alive or transfer in member.replies

        self._wait(lambda: settled(source) and settled(target), self.settings.transfer_timeout_s)
        self._transfer_in_flight = None
        sent, loaded = source.replies.get(transfer), target.replies.get(transfer)
        if not target.alive:
            return _failed("target", "died while receiving", self._describe(target))
        if not source.alive:
            return _failed("source", "died while sending", self._describe(source))
        if not (sent and loaded):
            return _failed("both", "transfer timed out", "")
        if not loaded["ok"]:  # the receiver's error first: a sender's is then a consequence
            return _failed("target", loaded["error"], self._describe(target))
        if not sent["ok"]:
            return _failed("source", sent["error"], self._describe(source))
        return loaded

    def _resume_all(self, restore: dict[int, str], step: int, checkpoint_step=None) -> bool:
        self.generation += 1
        workers = self._workers()
        backend = group_backend([(m.node, m.device) for m in workers])
        for member in workers:
            member.report = None
            self._send(
                member,
                {
                    "type": "resume",
                    "generation": self.generation,
                    "rank": member.rank,
                    "world_size": self.settings.world_size,
                    "step": step,
                    "restore": restore[member.rank],
                    "slot_bytes": self.slot_bytes,
                    "backend": backend,
                },
            )

        def resumed():
            if self._deaths:
                return True
            return all(m.report for m in workers)

        ok = self._wait(resumed, self.settings.collective_timeout_s)
        return ok and not self._deaths and all(m.report["type"] == "resumed" for m in workers)

    def _recover_again(self, failures: list[Failure]) -> None:
        """A process died while the group re-formed: recover from that too; the state of the
        earlier failures had already moved, so they are resolved when the job runs again."""
        self._recover(self._new_failures())
        self._report_live([f for f in failures if f.target is not None], self.step, 0)

    def _checkpoint_fallback(
        self, failures: list[Failure], resume_step: int | None, reason: str
    ) -> None:
        """No live copy or no spare: every rank rolls back to the newest complete checkpoint,
        the missing ones on cold processes. A rollback, reported as one."""
        s = self.settings
        restore_step = None
        if has_checkpoint_fallback(s.mode):
            restore_step = checkpoint.newest_complete(s.checkpoint_dir)
        if restore_step is None:
            raise JobFailed(no_live_recovery(s.mode, reason, s.checkpoint_dir))
        print(
            f"yoco agent: live recovery impossible ({reason}); restoring the checkpoint of step "
            f"{restore_step}",
            flush=True,
        )
        if resume_step is None:  # nobody survived to say; the last heartbeats tell
            resume_step = max(m.step for m in self.members if m.rank is not None)
        for failure in failures:
            if failure.member.alive:
                failure.member.role = "retired"
                self._send(failure.member, {"type": "retire"})
            target = failure.target or self._cold_process()
            target.role, target.rank = "worker", failure.rank
        if s.mode == "transparent":
            # An unmodified script cannot be moved back to a step inside a running process:
            # every rank restarts it on a fresh one, which catches up to the checkpoint's step.
            for member in [m for m in self._workers() if m.rank not in {f.rank for f in failures}]:
                member.role = "retired"
                self._send(member, {"type": "retire"})
                target = self._cold_process()
                target.role, target.rank = "worker", member.rank
        restore = {m.rank: "checkpoint" for m in self._workers()}
        if not self._resume_all(restore, restore_step):
            self._recover(self._new_failures())
            return
        for failure in failures:
            self.sink.emit(
                self.events.checkpoint_restored(
                    failure.incident,
                    steps_lost=resume_step - restore_step,
                    checkpoint_step=restore_step,
                    duration_ms=(time.monotonic() - failure.detected) * 1000,
                )
            )
        self._await_start(failures, restore_step)

    def _cold_process(self) -> Member:
        spare = self._ready_spare()
        if spare is not None:
            return spare
        if self.spawn is None:
            raise JobFailed(
                f"world size {self.settings.world_size} cannot be filled: no spare left and "
                "this coordinator cannot start processes (start more spares, or use --respawn)"
            )
        self.spawn()
        if not self._wait(lambda: bool(self._spares()), self.settings.join_timeout_s):
            raise JobFailed("a replacement process did not start within the join timeout")
        return self._spares()[0]

    def _finish(self) -> None:
        if self._awaiting_start:  # a rank that resumed after the last step started none
            self._report_running(time.monotonic())
        for member in self._workers():
            self._send(member, {"type": "done"})
        self._stop_all()
        self.sink.emit(self.events.job_finished("completed", self.step))

    def _stop_all(self) -> None:
        for member in self.members:
            if member.role in ("spare", "receiving"):
                self._send(member, {"type": "retire"})
        self._write_status()


def _failed(side: str, error: str, who: str) -> dict:
    """A failed transfer: which side failed, its error (the same text for the same failure on
    another process) and the reason reported."""
    if side == "target":
        reason = f"{who} could not receive the state: {error}"
    elif side == "source":
        reason = f"the source, {who}, could not send the state: {error}"
    else:
        reason = error
    return {"ok": False, "side": side, "error": error, "reason": reason}


def _protection(workers: list[Member]) -> dict | None:
    """Transparent mode: is every rank's state fully captured, and if not, what is missing."""
    reports = [m.protection for m in workers if m.protection]
    if not reports:
        return None
    unprotected = sorted({name for r in reports for name in r["unprotected"]})
    return {"protected": not unprotected, "unprotected": unprotected}


def _gpus(workers: list[Member]) -> int:
    return sum(1 for m in workers if m.device.startswith("cuda"))
