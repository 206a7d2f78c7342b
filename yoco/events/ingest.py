"""Storing a batch of events: validate each, insert the valid ones, answer per event.

Idempotency is the database's unique constraint on (source, event id), enforced by the insert
itself (`INSERT … ON CONFLICT DO NOTHING`) in the same transaction: never check-then-insert.
A row that did not go in because one with its key exists is then compared with that row:
equal JSON → `duplicate`, anything else → `conflict` (the first stays).
Processing the stored events into jobs and incidents runs after commit, as a Celery task sent
by name (`yoco.guarantee.processing`, one layer up), which also sweeps up any event a crash left
unprocessed.
"""

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from celery import current_app
from django.db import connection, transaction
from django.utils import timezone

from yoco.accounts.models import Cluster
from yoco.events.models import Event
from yoco.events.schema import NOT_STORABLE, InvalidEvent, ParsedEvent, parse_event

# Registered by yoco.guarantee (GuaranteeConfig.ready): a name, so ingest imports nothing above.
PROCESS_EVENTS_TASK = "yoco.guarantee.tasks.process_events_task"
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


def canonical_json(event: dict) -> str:
    """The stored text of an event: keys sorted (PostgreSQL's jsonb keeps no order anyway)."""
    return json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(canonical: str) -> str:
    return hashlib.sha256(canonical.encode()).hexdigest()


def _result(index: int, event: Any, status: str, error: str | None = None) -> dict[str, Any]:
    event_id = event.get("id") if isinstance(event, dict) else None
    # Echoed only when it can be written back as UTF-8 (not a lone surrogate).
    shown = isinstance(event_id, str) and not NOT_STORABLE.search(event_id)
    result = {"index": index, "id": event_id if shown else None}
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


def _store(cluster: Cluster, valid, answer) -> None:
    now = timezone.now()
    first: dict[tuple[str, str], tuple[int, dict]] = {}  # key → (index, raw) of its first copy
    rows = []
    for index, raw, parsed in valid:
        key = (parsed.source, parsed.id)
        if key not in first:
            first[key] = (index, raw)
            text = canonical_json(raw)
            rows.append(
                (cluster.pk, parsed.source, parsed.id, parsed.type, parsed.time, parsed.subject,
                 text, content_hash(text), now)
            )  # fmt: skip

    with transaction.atomic():
        inserted = _insert_new(rows)
        stored = {key: first[key][1] for key in inserted}
        stored_pks = dict(inserted)
        for key, (pk, raw) in _stored_rows(set(first) - set(inserted)).items():
            stored[key], stored_pks[key] = raw, pk
        for index, raw, parsed in valid:
            key = (parsed.source, parsed.id)
            if key in inserted and first[key][0] == index:
                answer[index] = _result(index, raw, ACCEPTED)
            elif stored.get(key) == raw:
                answer[index] = _result(index, raw, DUPLICATE)
            else:
                answer[index] = _result(
                    index,
                    raw,
                    CONFLICT,
                    f"an event with source {parsed.source!r} and id {parsed.id!r} is already "
                    "stored with other content; the first one stays",
                )
        # Processing runs after commit, on every stored event this batch names: a retry of a
        # batch whose processing a crash cut short (all `duplicate`) processes it now.
        pks = sorted(stored_pks.values())
        transaction.on_commit(lambda: _send_to_processing(pks))


def _send_to_processing(pks: list[int]) -> None:
    """Hand stored events to processing (`yoco.guarantee`, the layer above) by task name: a
    worker runs it, or this process at once when Celery is eager (no broker)."""
    current_app.signature(PROCESS_EVENTS_TASK, args=(pks,)).delay()


COLUMNS = ("cluster_id", "source", "event_id", "type", "time", "subject", "raw", "content_hash",
           "received_at")  # fmt: skip
ROWS_PER_STATEMENT = 1000


def _insert_new(rows: list[tuple]) -> dict[tuple[str, str], int]:
    """INSERT … ON CONFLICT DO NOTHING RETURNING: the keys that went in, with their row ids.
    The unique constraint decides, inside this transaction; PostgreSQL and SQLite (3.35+) both
    speak it."""
    inserted: dict[tuple[str, str], int] = {}
    with connection.cursor() as cursor:
        for start in range(0, len(rows), ROWS_PER_STATEMENT):
            sql, params = _insert_statement(rows[start : start + ROWS_PER_STATEMENT])
            cursor.execute(sql, params)
            inserted.update(((source, event_id), pk) for source, event_id, pk in cursor.fetchall())
    return inserted


def _insert_statement(chunk: list[tuple]) -> tuple[str, list]:
    head = f"INSERT INTO {Event._meta.db_table} ({', '.join(COLUMNS)}) "
    tail = " ON CONFLICT (source, event_id) DO NOTHING RETURNING source, event_id, id"
    if connection.vendor == "postgresql":
        # The whole chunk as one JSON parameter: the driver escapes one string instead of
        # scanning thousands of placeholders or escaping array elements one by one.
        batch = json.dumps(
            [
                [cluster_id, source, event_id, type_, time.isoformat(), subject, text, digest,
                 now.isoformat()]
                for cluster_id, source, event_id, type_, time, subject, text, digest, now in chunk
            ]
        )  # fmt: skip
        select = (
            "SELECT (r->>0)::bigint, r->>1, r->>2, r->>3, (r->>4)::timestamptz, r->>5, "
            "(r->>6)::jsonb, r->>7, (r->>8)::timestamptz FROM jsonb_array_elements(%s::jsonb) r"
        )
        return head + select + tail, [batch]
    ops = connection.ops
    params: list = []
    for cluster_id, source, event_id, type_, time, subject, text, digest, now in chunk:
        params += [
            cluster_id, source, event_id, type_, ops.adapt_datetimefield_value(time), subject,
            text, digest, ops.adapt_datetimefield_value(now),
        ]  # fmt: skip
    row = "(" + ", ".join(["%s"] * len(COLUMNS)) + ")"
    return head + "VALUES " + ", ".join([row] * len(chunk)) + tail, params


def _stored_rows(keys) -> dict[tuple[str, str], tuple[int, dict]]:
    """The row id and stored JSON of each key already stored."""
    by_source: dict[str, list[str]] = {}
    for source, event_id in keys:
        by_source.setdefault(source, []).append(event_id)
    stored = {}
    for source, ids in by_source.items():
        rows = Event.objects.filter(source=source, event_id__in=ids).values_list(
            "event_id", "pk", "raw"
        )
        stored.update(((source, event_id), (pk, raw)) for event_id, pk, raw in rows)
    return stored
