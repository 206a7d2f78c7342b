"""Membership and failure detection: who is in the job, in which role, and which ranks must move.

Every process is a Member from its hello on. What the coordinator learns about them (a report, a
closed connection, a silent heartbeat, a health alarm, an operator's drain) lands here, and
`new_failures()` turns it into the incidents a recovery handles (agent/recovery.py): deaths
(unplanned), alarms (pre-emptive, only while a spare is free for them) and drains (planned).
The coordinator calls every method from its own thread.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

from agent.events import new_incident_id
from agent.protocol import Channel, ChannelClosed
from agent.spares import SpareSupply

# Reports a quiesced worker sends; each says "I am at a step boundary, waiting for orders".
QUIESCED = {"stalled", "paused", "finished"}


class JobFailed(RuntimeError):
    pass


@dataclass
class Member:
    id: int
    channel: Channel
    pid: int
    node: str
    device: str
    role: str  # worker | spare | receiving | retired | dead
    rank: int | None = None
    step: int = 0
    last_seen: float = field(default_factory=time.monotonic)
    ready: bool = False
    state_bytes: int = 0
    report: dict | None = None  # the last quiesced report in a recovery
    replies: dict = field(default_factory=dict)  # transfer id -> "sent"/"loaded" reply
    fatal_alarm: dict | None = None
    protection: dict | None = None  # transparent mode: what its capture covers
    parallelism: dict | None = None  # a sharded job's mesh: dimension name -> size
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
    verified: bool | None = None  # the target's digest of the moved state equals the source's
    tried: set[int] = field(default_factory=set)  # spares (member ids) that failed to take it
    receive_error: str | None = None  # the last spare's error receiving the state
    stays: bool = False  # a degrading worker no spare could take over: it trains on
    resume_step: int = 0
    completion: dict | None = None  # migration.completed's fields, sent once training runs


class Membership:
    def __init__(self, world_size: int, spare_supply: SpareSupply | None):
        self.world_size = world_size
        self.spare_supply = spare_supply  # told when a local spare is ready or gone
        self.members: list[Member] = []
        self.generation = 0  # of the process group; 0 until the job started
        self.step = 0  # the newest step a worker reported
        # Workers that died and no recovery handled yet (a recovery watches it to stop waiting).
        self.deaths: list[Member] = []
        self._ids = itertools.count()
        self._alarms: list[tuple[Member, dict]] = []
        self._drains: list[int] = []

    # -- joining and leaving ------------------------------------------------------------------

    def admit(self, channel: Channel, hello: dict, welcome: dict) -> Member:
        """A new process: a worker while ranks are free before the job started, else a spare.
        `welcome`: what every process is told besides its role and rank."""
        workers = {m.rank for m in self.members if m.role == "worker"}
        free = [r for r in range(self.world_size) if r not in workers]
        started = self.generation > 0
        role = "worker" if free and not started else "spare"
        member = Member(
            next(self._ids), channel, hello["pid"], hello["node"], hello["device"], role
        )
        if role == "worker":
            member.rank = free[0]
        self.members.append(member)
        self.send(
            member,
            {
                "type": "welcome",
                "role": role,
                "rank": member.rank,
                "world_size": self.world_size,
                **welcome,
            },
        )
        return member

    def record(self, member: Member, message: dict) -> None:
        """What a member's message says about it."""
        member.last_seen = time.monotonic()
        kind = message["type"]
        if kind == "heartbeat":
            member.step = message["step"]
        elif kind == "ready":
            member.ready = True
            if self.spare_supply is not None:
                self.spare_supply.ready(member.pid)
            member.state_bytes = message["state_bytes"]
            member.parallelism = message.get("parallelism")
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
        elif kind == "alarm":
            member.last_alarm = message
            if message["fatal"]:
                member.fatal_alarm = message
            else:
                self._alarms.append((member, message))
        elif kind == "fatal":
            raise JobFailed(f"{self.describe(member)}: {message['message']}")

    def exited(self, pid: int, returncode: int) -> None:
        """A local process ended (the launcher says so)."""
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

    def silent(self, timeout_s: float) -> list[Member]:
        """Declare dead, and return, the processes whose heartbeat stopped for `timeout_s`."""
        now = time.monotonic()
        gone = []
        for member in self.members:
            # A process still building its model is judged by its connection alone.
            silent = now - member.last_seen > timeout_s
            if member.alive and member.ready and silent:
                print(f"yoco agent: no heartbeat from {self.describe(member)}", flush=True)
                self.mark_dead(member)
                gone.append(member)
        return gone

    def mark_dead(self, member: Member) -> None:
        if not member.alive:
            return
        was = member.role
        member.role = "dead"
        member.channel.close()
        if was == "worker":
            self.deaths.append(member)

    def send(self, member: Member, message: dict) -> None:
        try:
            member.channel.send(message)
        except ChannelClosed:
            self.mark_dead(member)

    # -- who is who ---------------------------------------------------------------------------

    def describe(self, member: Member) -> str:
        who = f"rank {member.rank}" if member.rank is not None else "a spare"
        return f"{who} (pid {member.pid} on {member.node})"

    def workers(self) -> list[Member]:
        return sorted((m for m in self.members if m.role == "worker"), key=lambda m: m.rank)

    def spares(self) -> list[Member]:
        return [m for m in self.members if m.role == "spare" and m.ready]

    def spare_coming(self) -> bool:
        return self.spare_supply is not None and self.spare_supply.coming()

    def worker(self, rank: int) -> Member:
        for member in self.members:
            if member.role == "worker" and member.rank == rank:
                return member
        raise LookupError(f"no live worker has rank {rank}")

    def ranks_on(self, node: str | None) -> list[int]:
        ranks = sorted(m.rank for m in self.members if m.role == "worker" and m.node == node)
        if not ranks:
            raise LookupError(f"no worker on node {node!r}")
        return ranks

    # -- failures -----------------------------------------------------------------------------

    def drain(self, rank: int) -> None:
        """An operator asked to move `rank` off its device (planned)."""
        self._drains.append(rank)

    def new_failures(self, claimed: int = 0) -> list[Failure]:
        """Failures not yet being handled; `claimed`: spares the recovery in progress still
        needs."""
        failures = []
        for dead in self.deaths:
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
        self.deaths.clear()
        # A degrading worker still trains: it moves only to a spare no death needs, so alarms
        # (the same one on every rank at once, say) can never leave a rank without a home.
        free = len(self.spares()) - claimed - len(failures)
        waiting = []  # alarms that wait for a spare still starting
        for member, alarm in self._alarms:
            if member.role != "worker" or member.rank in {f.rank for f in failures}:
                continue
            if free <= 0 and self.spare_coming():
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
                member = self.worker(rank)
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
