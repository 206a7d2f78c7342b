"""Storing a batch of events: validate each, insert the valid ones, answer per event.

Idempotency is the database's unique constraint on (source, event id), enforced by the insert
itself (`INSERT … ON CONFLICT DO NOTHING`) in the same transaction: never check-then-insert.
A row that did not go in because one with its key exists is then compared with that row:
equal JSON → `duplicate`, anything else → `conflict` (the first stays).
Folding the stored events into jobs and incidents runs after commit, as a Celery task.
"""

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from yoco.accounts.models import Cluster
from yoco.events.models import Event
from yoco.events.schema import InvalidEvent, ParsedEvent, parse_event

ACCEPTED, DUPLICATE, CONFLICT, REJECTED = "accepted", "duplicate", "conflict", "rejected"


@dataclass
class IngestResult:
    results: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        counts = {ACCEPTED: 0, DUPLICATE: 0, CONFLICT: 0, REJECTED: 0}
        for result in self.results:
            counts[result["status"]] += 1
        return {"results": self.results, **counts}

    @property
    def all_stored(self) -> bool:
        return all(r["status"] in (ACCEPTED, DUPLICATE) for r in self.results)


def content_hash(event: dict) -> str:
    canonical = json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _result(index: int, event: Any, status: str, error: str | None = None) -> dict[str, Any]:
    event_id = event.get("id") if isinstance(event, dict) else None
    result = {"index": index, "id": event_id if isinstance(event_id, str) else None}
    result["status"] = status
    if error:
        result["error"] = error
    return result


def ingest_events(cluster: Cluster, events: list[Any]) -> IngestResult:
    """Validate and store `events` written with `cluster`'s key; answer for every index."""
    answer: list[dict[str, Any] | None] = [None] * len(events)
    valid: list[tuple[int, dict, ParsedEvent]] = []
    for index, raw in enumerate(events):
        try:
            parsed = parse_event(raw)
        except InvalidEvent as exc:
            answer[index] = _result(index, raw, REJECTED, str(exc))
            continue
        if parsed.cluster != cluster.name:
            answer[index] = _result(
                index,
                raw,
                REJECTED,
                f"source names cluster {parsed.cluster!r}; this key writes only for "
                f"{cluster.name!r}",
            )
            continue
        valid.append((index, raw, parsed))

    if valid:
        _store(cluster, valid, answer)
    return IngestResult(results=answer)  # type: ignore[arg-type]


def _store(cluster, valid, answer) -> None:
    batch = uuid.uuid4()
    now = timezone.now()
    rows = []
    first_in_batch: dict[tuple[str, str], int] = {}
    repeats: list[tuple[int, dict, ParsedEvent]] = []
    for index, raw, parsed in valid:
        key = (parsed.source, parsed.id)
        if key in first_in_batch:
            repeats.append((index, raw, parsed))
            continue
        first_in_batch[key] = index
        rows.append(
            Event(
                cluster=cluster,
                source=parsed.source,
                event_id=parsed.id,
                type=parsed.type,
                time=parsed.time,
                subject=parsed.subject,
                data=parsed.data,
                raw=raw,
                content_hash=content_hash(raw),
                received_at=now,
                ingest_batch=batch,
            )
        )

    with transaction.atomic():
        Event.objects.bulk_create(rows, ignore_conflicts=True, batch_size=1000)
        inserted = set(Event.objects.filter(ingest_batch=batch).values_list("source", "event_id"))
        existing = {}
        missing = [(r.source, r.event_id) for r in rows if (r.source, r.event_id) not in inserted]
        if missing or repeats:
            keys = missing + [(p.source, p.id) for _, _, p in repeats]
            for source, event_id, raw in _stored_raw(keys):
                existing[(source, event_id)] = raw
        for index, raw, parsed in valid:
            key = (parsed.source, parsed.id)
            if key in inserted and first_in_batch[key] == index:
                answer[index] = _result(index, raw, ACCEPTED)
            elif existing.get(key) == raw:
                answer[index] = _result(index, raw, DUPLICATE)
            else:
                answer[index] = _result(
                    index,
                    raw,
                    CONFLICT,
                    f"an event with source {parsed.source!r} and id {parsed.id!r} is already "
                    "stored with other content; the first one stays",
                )
        if inserted:
            from yoco.events.tasks import fold_events_task

            subjects = sorted(
                {p.subject for _, _, p in valid if p.subject and (p.source, p.id) in inserted}
            )
            sources = sorted({p.source for _, _, p in valid if (p.source, p.id) in inserted})
            transaction.on_commit(lambda: fold_events_task.delay(cluster.pk, subjects, sources))


def _stored_raw(keys: list[tuple[str, str]]):
    by_source: dict[str, list[str]] = {}
    for source, event_id in keys:
        by_source.setdefault(source, []).append(event_id)
    for source, ids in by_source.items():
        for event_id, raw in Event.objects.filter(source=source, event_id__in=ids).values_list(
            "event_id", "raw"
        ):
            yield source, event_id, raw
