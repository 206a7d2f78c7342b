"""Helpers for the hostile-input tests: bodies written as raw JSON text (what `json.dumps` cannot
write: an integer of 5,000 digits, `1e999`), posted as a client would, and the check that the
valid events beside a bad one were kept and processed."""

import itertools
import json
import re

from tests.conftest import cloud_event

BATCH = "application/cloudevents-batch+json"
_RAW = re.compile(r'"@raw:(.*?)@"')
_subjects = itertools.count(1)


def raw(text: str) -> str:
    """A placeholder that `body` replaces with `text` written as is (not as a JSON string)."""
    return f"@raw:{text}@"


def body(events) -> str:
    return _RAW.sub(lambda m: m.group(1), json.dumps(events))


def post_text(api, key: str, text: str | bytes, content_type: str = BATCH, **extra):
    return api.post(
        "/api/v1/events",
        data=text,
        content_type=content_type,
        HTTP_AUTHORIZATION=f"Bearer {key}",
        **extra,
    )


def good_incident(time: str = "2026-03-01T10:00:00Z") -> list[dict]:
    """A failure fixed live: three valid events of one new subject."""
    subject = f"good-{next(_subjects)}"
    return [
        cloud_event("failure.detected", subject=subject, time=time, trigger="unplanned",
                    category="gpu_xid"),
        cloud_event("migration.completed", subject=subject, time=time, steps_lost=0,
                    duration_ms=900),
        cloud_event("job.resumed", subject=subject, time=time, step=10, downtime_ms=900),
    ]  # fmt: skip


def assert_kept_and_processed(events: list[dict]) -> None:
    """Every event stored and processed, and its subject's incident built from it."""
    from yoco.events.models import Event
    from yoco.guarantee.models import Incident

    for event in events:
        stored = Event.objects.get(source=event["source"], event_id=event["id"])
        assert stored.processed_at is not None and stored.quarantined_at is None
        if "subject" in event:
            incident = Incident.objects.get(subject=event["subject"])
            assert incident.detected_at is not None
