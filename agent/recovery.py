"""Recovery: what follows a failure, until training runs again.

One pass over a set of failures reads top to bottom:

    detect  ->  quiesce (abort the step in flight, or pause at the next boundary)
            ->  for each failed rank, take the first path that works:
                  stream its state from the leaving worker itself or a replica to a spare
                  (a spare that cannot take it: the next spare; a source that fails: the next
                  source), the target's digest of what moved checked against the source's
                  no live copy or no spare left: every rank rolls back to the newest checkpoint
            ->  re-form the group at the same world size and rank order  ->  resume

A member dying while the group re-forms starts another pass, for the new failures; `recover()`
loops over passes until one resumes. Incidents close (migration.completed, job.resumed) once
every rank has started a step in the new group (SPEC 2.3).
The coordinator calls every method from its own thread.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Collection

from agent import checkpoint
from agent.advice import NO_LIVE_COPY, NO_SPARE, has_checkpoint_fallback, no_live_recovery
from agent.devices import group_backend
from agent.events import EventFactory
from agent.membership import QUIESCED, Failure, JobFailed, Member, Membership
from agent.mirror import buddy_shift
from agent.reporter import EventSink
from agent.settings import Settings

# A target whose digest of the state it loaded is not the source's: it holds something else.
DIGEST_MISMATCH = "its digest of the moved state differs from the source's"


class NoLiveRecovery(Exception):
    """No live copy of some state, or no spare that can take it: only a checkpoint can help.
    `failure`: the incident whose migration.failed already said why, if one did."""

    def __init__(self, reason: str, failure: Failure | None = None):
        super().__init__(reason)
        self.reason = reason
        self.failure = failure


class Recovery:
    def __init__(
        self,
        settings: Settings,
        membership: Membership,
        sink: EventSink,
        events: EventFactory,
        wait: Callable[[Callable[[], bool], float], bool],
        write_status: Callable[[], None],
        spawn: Callable[[], None] | None,
    ):
        """`wait(done, timeout_s)`: handle what arrives
        until `done()` or the timeout (False then); `spawn()`: start one more (cold) process,
        None when the launcher cannot."""
        self.settings = settings
        self.membership = membership
        self.sink = sink
        self.events = events
        self.wait = wait
        self.write_status = write_status
        self.spawn = spawn
        self.slot_bytes = 0  # each rank's slot of the per-rank mirror, fixed at the start
        # Ranks this far apart hold the same state (replica_stride): 1 when every rank is a full
        # replica, 0 when no other rank holds a rank's shard (its buddy's mirror does; a shard
        # with replicas, HSDP, has no mirror).
        self.replica_stride = 1
        self.buddy_shift = 1  # a sharded rank r's mirror is on rank r + buddy_shift (mirror.py)
        self.transfer_in_flight: dict | None = None  # for the status
        self.open_incidents: dict[str, dict] = {}  # detected, not yet resumed (for the status)
        self._transfer_ids = itertools.count()
        self._awaiting_start: list[Failure] = []  # recovered, until every rank starts a step

    # -- passes -------------------------------------------------------------------------------

    def recover(self, failures: list[Failure]) -> None:
        """Recover from `failures`, and from whatever fails while it runs, until the group
        resumes. Ranks an earlier pass moved before its group failed to re-form are reported
        once the later passes are over, newest first; their state had already moved."""
        unreported: list[list[Failure]] = []
        pending: list[Failure] | None = failures
        while pending is not None:
            pending = self._recover_once(pending, unreported)
        for moved in reversed(unreported):
            self._report_live([f for f in moved if f.target is not None], self.membership.step, 0)

    def _recover_once(
        self, failures: list[Failure], unreported: list[list[Failure]]
    ) -> list[Failure] | None:
        """One pass; the failures the next pass must handle, or None when the group resumed."""
        for failure in failures:
            self._emit_detected(failure)
        live = self._quiesce(failures)
        resume_step = max(m.report["step"] for m in live) if live else None
        try:
            restore = self._migrate(failures, live, resume_step)
        except NoLiveRecovery as impossible:
            return self._checkpoint_fallback(failures, resume_step, impossible)
        moved = [f for f in failures if not f.stays]
        for failure in moved:
            if failure.member.alive:  # the drained or degrading worker itself
                failure.member.role = "retired"
                self.membership.send(failure.member, {"type": "retire"})
            failure.target.role = "worker"
            failure.target.rank = failure.rank
        recompute_ms = max((m.report.get("recompute_ms", 0) for m in live), default=0)
        if not self.resume_all(restore, resume_step):
            unreported.append(moved)
            return self.membership.new_failures()
        self._report_live(moved, resume_step, recompute_ms)
        self._await_start([f for f in failures if f.stays], resume_step)
        return None

    def _emit_detected(self, failure: Failure) -> None:
        member = failure.member
        self.open_incidents[failure.incident] = {
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
        membership = self.membership
        unplanned = any(f.trigger == "unplanned" for f in failures)
        for member in membership.workers():
            if not (member.report and member.report["type"] in QUIESCED):
                member.report = None
            membership.send(member, {"type": "abort" if unplanned else "pause"})
        aborted = unplanned

        def quiet():
            nonlocal aborted
            if membership.deaths and not aborted:
                aborted = True
                for member in membership.workers():
                    membership.send(member, {"type": "abort"})
            return all(m.report for m in membership.workers())

        if not self.wait(quiet, self.settings.collective_timeout_s):
            silent = [m for m in membership.workers() if not m.report]
            for member in silent:
                membership.mark_dead(member)
        self._absorb_new_failures(failures, [])
        return membership.workers()

    # -- live paths ---------------------------------------------------------------------------

    def _migrate(self, failures: list[Failure], live: list[Member], step: int | None):
        """Give every failed rank a spare holding its state at `step`, and bring laggards (a
        survivor that missed the last update while others applied it) up to `step`. Returns
        how each rank restores its per-rank state; raises NoLiveRecovery when only a checkpoint
        can help."""
        while True:
            restore = self._migrate_once(failures, live, step)
            if restore is not None:
                return restore
            live = self.membership.workers()  # a laggard's transfer failed: once more

    def _migrate_once(self, failures: list[Failure], live: list[Member], step: int | None):
        """As `_migrate`, or None when bringing a laggard up failed (new failures absorbed)."""
        restore = {m.rank: "own" for m in live if m.rank not in {f.rank for f in failures}}
        if step is None:
            raise NoLiveRecovery(NO_LIVE_COPY)
        pending = list(failures)
        while pending:
            failure = pending.pop(0)
            source, state_source = self._pick_source(failure, step, failures)
            spare = self._ready_spare(failure.tried) if source is not None else None
            if source is None or spare is None:
                reason = (
                    self._no_live_copy(failure, failures)
                    if source is None
                    else self._no_spare(failure)
                )
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
            reply = self._transfer(source, spare, failure.rank, state_source == "mirror")
            if reply["ok"]:
                failure.target, failure.nbytes = spare, reply["bytes"]
                failure.transfer_ms = reply["duration_ms"]
                failure.verified = reply["verified"]
                restore[failure.rank] = "received"
                continue
            if spare.role == "receiving":
                spare.role = "spare"
            if reply["side"] != "target" and state_source == "mirror":
                # The buddy holds the only copy: when it cannot send it, no other rank can.
                self._give_up(failure, reply["reason"], restore)
                continue
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
            pending.insert(0, failure)  # its next path: another spare, or another source
        for laggard in [m for m in self.membership.workers() if m.report["step"] < step]:
            source = None
            if self.replica_stride != 0:  # a replica at `step` (none under a mirror)
                source, _ = self._pick_source(Failure(laggard.rank, laggard, "", "", ""), step, [])
            if source is None:
                raise NoLiveRecovery(
                    f"rank {laggard.rank} missed the update of step {step - 1} and no other "
                    "rank holds its state as it is after it"
                )
            reply = self._transfer(source, laggard, laggard.rank, False)
            if not reply["ok"]:
                self._absorb_new_failures(failures, [])
                return None
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
            raise NoLiveRecovery(reason, failure)

    def _no_live_copy(self, failure: Failure, failures: list[Failure]) -> str:
        """Why no live copy of a rank's state is left; in a sharded job, where its copies were."""
        if self.replica_stride == 1:
            return NO_LIVE_COPY
        if self.replica_stride > 1:  # replicas, and no mirror
            return f"{NO_LIVE_COPY} (rank {failure.rank}'s shard: no replica of it is left)"
        buddy = (failure.rank + self.buddy_shift) % self.settings.world_size
        lost = "failed too" if buddy in {f.rank for f in failures} else "is behind"
        return (
            f"{NO_LIVE_COPY} (rank {failure.rank}'s shard: no replica of it is left, and its "
            f"buddy, rank {buddy}, which mirrors it, {lost})"
        )

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
        for failure in self.membership.new_failures(claimed):
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
        n, stride = self.settings.world_size, self.replica_stride
        at_step = [
            m
            for m in self.membership.workers()
            if m.rank not in replaced and m.report and m.report["step"] == step
        ]
        replicas = [m for m in at_step if stride and (m.rank - failure.rank) % stride == 0]
        if replicas:
            # The buddy (next replica) first: spreads the load when several ranks fail at once.
            replicas.sort(key=lambda m: (m.rank - failure.rank) % n)
            return replicas[0], "replica"
        if stride == 0:  # a shard without replicas: the buddy keeps a mirror of it
            buddy = [m for m in at_step if m.rank == (failure.rank + self.buddy_shift) % n]
            return (buddy[0], "mirror") if buddy else (None, None)
        return None, None

    def _ready_spare(self, tried: Collection[int] = ()) -> Member | None:
        """A ready spare not in `tried` (ids); when none is, but one is still starting, wait
        for it (at most the join timeout): a failure soon after the job started finds the
        spares still loading."""
        membership = self.membership

        def untried() -> list[Member]:
            return [s for s in membership.spares() if s.id not in tried]

        if not untried() and membership.spare_coming():
            print("yoco agent: no spare ready yet; waiting for one to finish starting", flush=True)
            membership.spare_supply.hurry()
            self.wait(
                lambda: bool(untried()) or not membership.spare_coming(),
                self.settings.join_timeout_s,
            )
        return next(iter(untried()), None)

    def _transfer(self, source: Member, target: Member, for_rank: int, mirror: bool) -> dict:
        """Stream `for_rank`'s state from `source` into `target`; `mirror`: from the copy of a
        sharded rank's shard its buddy keeps (agent/mirror.py). The reply: ok, bytes,
        duration_ms and verified (both digests present and equal); or which side failed."""
        describe = self.membership.describe
        transfer = f"{self.membership.generation}.{next(self._transfer_ids)}"
        self.transfer_in_flight = {
            "id": transfer,
            "source_pid": source.pid,
            "target_pid": target.pid,
            "rank": for_rank,
        }
        self.write_status()
        command = {"transfer": transfer, "for_rank": for_rank, "mirror": mirror}
        self.membership.send(source, {"type": "send_state", **command})
        # for_rank: a sharded job's spare builds its model only once it knows its rank.
        self.membership.send(target, {"type": "recv_state", **command})

        def settled():
            if not (source.alive and target.alive):
                return True  # the other side need not be waited for (cancelled below)
            return transfer in source.replies and transfer in target.replies

        self.wait(settled, self.settings.transfer_timeout_s)
        for member in (source, target):
            if member.alive and transfer not in member.replies:
                # Free it for the next path at once: its peer is gone, or the transfer timed out.
                self.membership.send(member, {"type": "cancel_transfer", "transfer": transfer})
        self.transfer_in_flight = None
        sent, loaded = source.replies.get(transfer), target.replies.get(transfer)
        if not target.alive:
            return _failed("target", "died while receiving", describe(target))
        if not source.alive:
            return _failed("source", "died while sending", describe(source))
        if not (sent and loaded):
            return _failed("both", "transfer timed out", "")
        if not loaded["ok"]:  # the receiver's error first: a sender's is then a consequence
            return _failed("target", loaded["error"], describe(target))
        if not sent["ok"]:
            return _failed("source", sent["error"], describe(source))
        if loaded.get("digest") != sent.get("digest"):
            return _failed("target", DIGEST_MISMATCH, describe(target))
        return {**loaded, "verified": loaded.get("digest") is not None}

    # -- resuming -----------------------------------------------------------------------------

    def resume_all(self, restore: dict[int, str], step: int) -> bool:
        """Every worker joins the next generation of the group at `step`, restoring its
        per-rank state as `restore` says; False when the group did not re-form."""
        membership = self.membership
        membership.generation += 1
        workers = membership.workers()
        backend = group_backend([(m.node, m.device) for m in workers])
        self.buddy_shift = buddy_shift([m.node for m in sorted(workers, key=lambda m: m.rank)])
        for member in workers:
            member.report = None
            membership.send(
                member,
                {
                    "type": "resume",
                    "generation": membership.generation,
                    "rank": member.rank,
                    "world_size": self.settings.world_size,
                    "step": step,
                    "restore": restore[member.rank],
                    "slot_bytes": self.slot_bytes,
                    "backend": backend,
                    "buddy_shift": self.buddy_shift,
                },
            )

        def resumed():
            if membership.deaths:
                return True
            return all(m.report for m in workers)

        ok = self.wait(resumed, self.settings.collective_timeout_s)
        return ok and not membership.deaths and all(m.report["type"] == "resumed" for m in workers)

    def _report_live(self, failures: list[Failure], resume_step: int, recompute_ms: float) -> None:
        now = time.monotonic()
        for failure in failures:
            failure.completion = {
                "duration_ms": (now - failure.detected) * 1000,
                "nbytes": failure.nbytes,
                "recompute_ms": recompute_ms if failure.trigger == "unplanned" else 0,
                "resumed_step": resume_step,
                "verified": failure.verified,
            }
        self._await_start(failures, resume_step)

    def _await_start(self, failures: list[Failure], step: int) -> None:
        """The recovery of `failures` is over once every rank has started its first step after
        it (SPEC 2.3): until then their migration.completed and job.resumed wait."""
        for failure in failures:
            failure.resume_step = step
        self._awaiting_start += failures
        self.on_started()

    def on_started(self) -> None:
        """A worker started its first step in a generation: close the incidents once all have."""
        workers = self.membership.workers()
        starts = [m.started for m in workers]
        if not self._awaiting_start or not workers:
            return
        if any(s is None or s["generation"] != self.membership.generation for s in starts):
            return
        self._report_running(max(s["at"] for s in starts))

    def finish(self) -> None:
        """The job completed: a rank that resumed after the last step started none."""
        if self._awaiting_start:
            self._report_running(time.monotonic())

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
            self.open_incidents.pop(failure.incident, None)
            self.sink.emit(
                self.events.job_resumed(
                    failure.incident, step=failure.resume_step, downtime_ms=downtime_ms
                )
            )

    # -- the checkpoint path ------------------------------------------------------------------

    def _checkpoint_fallback(
        self, failures: list[Failure], resume_step: int | None, impossible: NoLiveRecovery
    ) -> list[Failure] | None:
        """No live copy or no spare: every rank rolls back to the newest complete checkpoint,
        the missing ones on cold processes (a spare of a sharded job builds as its rank then).
        A rollback, reported as one: every incident's migration failed, whatever became of
        its own state. Returns the failures the next pass must handle when the group did not
        re-form, else None."""
        s = self.settings
        membership = self.membership
        reason = impossible.reason
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
            resume_step = max(m.step for m in membership.members if m.rank is not None)
        for failure in failures:
            if failure.member.alive:
                failure.member.role = "retired"
                membership.send(failure.member, {"type": "retire"})
            target = failure.target or self._cold_process()
            target.role, target.rank = "worker", failure.rank
        if s.mode == "transparent":
            # An unmodified script cannot be moved back to a step inside a running process:
            # every rank restarts it on a fresh one, which catches up to the checkpoint's step.
            failed = {f.rank for f in failures}
            for member in [m for m in membership.workers() if m.rank not in failed]:
                member.role = "retired"
                membership.send(member, {"type": "retire"})
                target = self._cold_process()
                target.role, target.rank = "worker", member.rank
        for failure in failures:
            if failure is not impossible.failure:
                why = reason
                if impossible.failure is not None:
                    why = f"every rank rolls back with rank {impossible.failure.rank}: {reason}"
                self.sink.emit(self.events.migration_failed(failure.incident, why))
        restore = {m.rank: "checkpoint" for m in membership.workers()}
        if not self.resume_all(restore, restore_step):
            return membership.new_failures()
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
        return None

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
        if not self.wait(lambda: bool(self.membership.spares()), self.settings.join_timeout_s):
            raise JobFailed("a replacement process did not start within the join timeout")
        return self.membership.spares()[0]


def replica_stride(parallelism: dict[str, int], world_size: int) -> int:
    """How far apart in rank two holders of the same state are: every rank (1) in replicated
    data parallelism; world / replicas with a replica dimension over sharded ones (HSDP: the
    replica dimension is the mesh's first, Run.device_mesh); none (0) without one."""
    replicas = parallelism.get("dp_replicate", 1)
    if set(parallelism) == {"dp_replicate"}:
        return 1
    return world_size // replicas if replicas > 1 else 0


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
