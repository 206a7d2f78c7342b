"""Processing stored events into their jobs, incidents and years, so that every stored event is
processed eventually (SPEC 3), whatever died in between and whatever answer the client got.

An event is stored unprocessed; `do_process_events` folds it and sets its `processed_at` in
the same transaction, so a crash leaves it either processed or still pending, never half-done.
Pending events are found again by `process_pending` (the sweep): run every 30 s by Celery beat,
after every ingest, and by `manage.py process_pending`; a duplicate's retry therefore processes
what a crash left behind. Folding recomputes from the stored events, so processing an event
twice changes nothing (idempotent).

An event that cannot be processed on its own is quarantined with the reason (shown in the
admin) and left out of every later fold, so it blocks neither its batch nor its subject.
Database outages (OperationalError, InterfaceError) quarantine nothing: they propagate, and the
events stay pending for the next sweep.
"""

import logging
from collections.abc import Iterable

from django.db import InterfaceError, OperationalError, transaction
from django.db.models import Q
from django.utils import timezone

from yoco.accounts.actions import audit
from yoco.accounts.models import Cluster
from yoco.events.models import Event
from yoco.guarantee.expiry import expire_pending
from yoco.guarantee.fold import fold

log = logging.getLogger(__name__)

SWEEP_CHUNK = 1000  # pending events folded per transaction by the sweep
BACKLOG_PER_INGEST = 1000  # older pending events an ingest request also processes
TRANSIENT = (OperationalError, InterfaceError)


def process_events(pks: Iterable[int]) -> None:
    """Process those of the events `pks` that are still pending, cluster by cluster."""
    by_cluster: dict[int, list[int]] = {}
    for pk, cluster_id in (
        Event.objects.pending().filter(pk__in=list(pks)).values_list("pk", "cluster_id")
    ):
        by_cluster.setdefault(cluster_id, []).append(pk)
    for cluster_id, cluster_pks in sorted(by_cluster.items()):
        try:
            do_process_events(cluster_id, cluster_pks)
        except TRANSIENT:
            raise
        except Exception:
            log.warning("processing %d events together failed; one by one now", len(cluster_pks))
            _process_one_by_one(cluster_id, cluster_pks)


def process_pending(limit: int | None = None) -> int:
    """The sweep: process pending events, oldest first, `limit` at most; return how many were
    pending when looked at."""
    seen = 0
    while limit is None or seen < limit:
        chunk = SWEEP_CHUNK if limit is None else min(SWEEP_CHUNK, limit - seen)
        pks = list(Event.objects.pending().order_by("pk").values_list("pk", flat=True)[:chunk])
        if not pks:
            break
        seen += len(pks)
        process_events(pks)
    return seen


def process_after_ingest(pks: list[int]) -> None:
    """An ingest's own events first (synchronous without a broker: they show once the POST has
    answered), then some of any backlog a crash left, then the expiry of pending incidents."""
    process_events(pks)
    process_pending(limit=BACKLOG_PER_INGEST)
    expire_pending()  # ingest is also when stored outcomes catch up with the clock


def do_process_events(cluster_id: int, pks: list[int], *, alone: bool = False) -> int:
    """Fold the pending events `pks` of one cluster and mark them processed: one transaction.

    Folds of one cluster take its row lock, so two never interleave their reads and writes (a
    fold that read before another's commit would overwrite it with stale counts). `alone`: the
    fold reads, besides processed events, only these, so another pending event that cannot be
    processed does not take them down with it."""
    with transaction.atomic(durable=True):
        cluster = Cluster.objects.select_for_update().get(pk=cluster_id)
        rows = list(
            Event.objects.pending().filter(pk__in=pks).values_list("pk", "subject", "source")
        )
        if not rows:
            return 0  # processed meanwhile by another sweep
        events = Event.objects.foldable()
        if alone:
            events = events.filter(Q(processed_at__isnull=False) | Q(pk__in=pks))
        fold(
            cluster,
            {subject for _, subject, _ in rows if subject},
            {source for _, _, source in rows},
            events=events,
        )
        Event.objects.filter(pk__in=[pk for pk, _, _ in rows]).update(processed_at=timezone.now())
    return len(rows)


def do_quarantine_event(pk: int, reason: str) -> bool:
    """Set a pending event aside with the reason it could not be processed: one transaction."""
    with transaction.atomic(durable=True):
        event = Event.objects.pending().select_for_update().filter(pk=pk).first()
        if event is None:
            return False
        event.quarantined_at, event.quarantine_reason = timezone.now(), reason
        event.save(update_fields=["quarantined_at", "quarantine_reason"])
        audit(None, "quarantine_event", event, reason=reason)
    return True


def _process_one_by_one(cluster_id: int, pks: list[int]) -> None:
    for pk in sorted(pks):
        try:
            do_process_events(cluster_id, [pk], alone=True)
        except TRANSIENT:
            raise
        except Exception as exc:
            log.exception("event %s cannot be processed: quarantined", pk)
            do_quarantine_event(pk, f"{type(exc).__name__}: {exc}"[:2000])
