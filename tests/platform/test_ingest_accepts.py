"""Valid events are stored once and answered per index."""

from tests.conftest import cloud_event, post_events
from yoco.events.models import Event


def test_batch_of_valid_events_is_accepted(acme, api):
    key = acme.cluster_keys["east"]
    events = [
        cloud_event("job.started", framework="pytorch", world_size=8, gpus=8),
        cloud_event("failure.detected", subject="inc-1", trigger="unplanned", category="gpu_xid"),
    ]
    response = post_events(api, key, events)
    assert response.status_code == 200
    body = response.json()
    assert body["accepted"] == 2 and body["rejected"] == 0
    assert [r["status"] for r in body["results"]] == ["accepted", "accepted"]
    assert [r["id"] for r in body["results"]] == [e["id"] for e in events]
    assert Event.objects.count() == 2


def test_single_event_content_type(acme, api):
    event = cloud_event("job.started", framework="deepspeed", world_size=4)
    response = post_events(api, acme.cluster_keys["east"], event, single=True)
    assert response.status_code == 200
    assert response.json()["results"] == [{"index": 0, "id": event["id"], "status": "accepted"}]


def test_time_kept_in_utc_to_the_microsecond_and_receipt_time_kept(acme, api):
    event = cloud_event("job.started", framework="pytorch", world_size=1,
                        time="2026-03-01T12:00:00.123456+05:30")  # fmt: skip
    post_events(api, acme.cluster_keys["east"], [event])
    stored = Event.objects.get()
    assert stored.time.isoformat() == "2026-03-01T06:30:00.123456+00:00"
    assert stored.received_at is not None
    assert stored.raw == event


def test_resent_event_is_duplicate_and_stored_once(acme, api):
    key = acme.cluster_keys["east"]
    event = cloud_event("job.started", framework="pytorch", world_size=2)
    post_events(api, key, [event])
    reordered = dict(reversed(list(event.items())))  # key order does not matter
    response = post_events(api, key, [reordered])
    assert response.status_code == 200
    assert response.json()["duplicate"] == 1
    assert Event.objects.count() == 1


def test_same_id_twice_in_one_batch(acme, api):
    key = acme.cluster_keys["east"]
    event = cloud_event("job.started", framework="pytorch", world_size=2)
    other = {**event, "data": {"framework": "pytorch", "world_size": 3}}
    body = post_events(api, key, [event, event, other]).json()
    assert [r["status"] for r in body["results"]] == ["accepted", "duplicate", "conflict"]
    assert Event.objects.get().data["world_size"] == 2
