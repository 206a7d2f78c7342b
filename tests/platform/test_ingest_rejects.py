"""Bad input gets a clear answer and loses nothing good (SPEC 3)."""

import json

import pytest

from tests.conftest import cloud_event, post_events
from yoco.events.models import Event


def _good():
    return cloud_event("job.started", framework="pytorch", world_size=8)


def _without(event, name):
    return {k: v for k, v in event.items() if k != name}


BAD_EVENTS = {
    "not an object": lambda: ["an event"],
    "missing id": lambda: _without(_good(), "id"),
    "id not a string": lambda: {**_good(), "id": 17},
    "missing source": lambda: _without(_good(), "source"),
    "malformed source": lambda: {**_good(), "source": "east/job-1"},
    "wrong specversion": lambda: {**_good(), "specversion": "0.3"},
    "missing time": lambda: _without(_good(), "time"),
    "time without offset": lambda: {**_good(), "time": "2026-03-01T10:00:00"},
    "unparseable time": lambda: {**_good(), "time": "yesterday"},
    "impossible date": lambda: {**_good(), "time": "2026-02-30T10:00:00Z"},
    "unknown type": lambda: {**_good(), "type": "io.yoco.job.paused"},
    "unknown category": lambda: cloud_event(
        "failure.detected", subject="i", trigger="unplanned", category="cosmic_ray"
    ),
    "unknown trigger": lambda: cloud_event(
        "failure.detected", subject="i", trigger="whim", category="gpu_xid"
    ),
    "missing subject on failure": lambda: cloud_event(
        "failure.detected", trigger="unplanned", category="gpu_xid"
    ),
    "missing required data field": lambda: cloud_event("job.started", world_size=8),
    "data not an object": lambda: {**_good(), "data": [1, 2]},
    "negative count": lambda: cloud_event("job.started", framework="pytorch", world_size=-1),
    "float step": lambda: cloud_event("job.resumed", subject="i", step=1.5),
    "boolean count": lambda: cloud_event("job.started", framework="pytorch", world_size=True),
    "string duration": lambda: cloud_event(
        "migration.completed", subject="i", steps_lost=0, duration_ms="12"
    ),
    "unknown scope": lambda: cloud_event(
        "failure.detected", subject="i", trigger="unplanned", category="gpu_xid", scope="rack"
    ),
    "unknown mode": lambda: cloud_event(
        "migration.started", subject="i", mode="magic", state_source="self"
    ),
    "unknown framework": lambda: cloud_event("job.started", framework="jax", world_size=1),
    "another cluster's source": lambda: cloud_event(
        "job.started", cluster="north", framework="pytorch", world_size=1
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_EVENTS))
def test_bad_event_rejected_with_reason_and_good_one_kept(acme, api, case):
    bad = BAD_EVENTS[case]()
    good = _good()
    response = post_events(api, acme.cluster_keys["east"], [good, bad])
    assert response.status_code == 207
    body = response.json()
    assert body["results"][0]["status"] == "accepted"
    assert body["results"][1]["status"] == "rejected"
    assert body["results"][1]["error"]
    assert body["accepted"] == 1 and body["rejected"] == 1
    assert list(Event.objects.values_list("event_id", flat=True)) == [good["id"]]


def test_conflicting_resend_keeps_the_first(acme, api):
    key = acme.cluster_keys["east"]
    event = _good()
    post_events(api, key, [event])
    changed = {**event, "time": "2026-03-01T10:00:01Z"}
    response = post_events(api, key, [changed])
    assert response.status_code == 207
    assert response.json()["results"][0]["status"] == "conflict"
    assert Event.objects.get().raw == event


def test_invalid_event_with_existing_id_is_rejected_not_conflict(acme, api):
    key = acme.cluster_keys["east"]
    event = _good()
    post_events(api, key, [event])
    response = post_events(api, key, [{**event, "time": "no time"}])
    assert response.json()["results"][0]["status"] == "rejected"


def _raw_post(api, key, body, content_type="application/cloudevents-batch+json"):
    return api.post(
        "/api/v1/events", data=body, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {key}"
    )


def test_body_not_json_is_400(acme, api):
    response = _raw_post(api, acme.cluster_keys["east"], "{not json")
    assert response.status_code == 400
    assert "JSON" in response.json()["detail"]


def test_batch_body_not_an_array_is_400(acme, api):
    response = _raw_post(api, acme.cluster_keys["east"], json.dumps(_good()))
    assert response.status_code == 400


def test_single_body_not_an_object_is_400(acme, api):
    body = json.dumps([_good()])
    response = _raw_post(api, acme.cluster_keys["east"], body, "application/cloudevents+json")
    assert response.status_code == 400


def test_empty_batch_is_400(acme, api):
    assert _raw_post(api, acme.cluster_keys["east"], "[]").status_code == 400


def test_wrong_content_type_is_415(acme, api):
    response = _raw_post(api, acme.cluster_keys["east"], json.dumps([_good()]), "text/plain")
    assert response.status_code == 415
    assert Event.objects.count() == 0


def test_oversized_body_is_413(acme, api, settings):
    settings.YOCO_INGEST_MAX_BYTES = 2048
    events = [_good() for _ in range(50)]
    response = post_events(api, acme.cluster_keys["east"], events)
    assert response.status_code == 413
    assert Event.objects.count() == 0


def test_too_many_events_is_413(acme, api, settings):
    settings.YOCO_INGEST_MAX_EVENTS = 3
    response = post_events(api, acme.cluster_keys["east"], [_good() for _ in range(4)])
    assert response.status_code == 413


def test_no_key_is_401(acme, api):
    response = api.post(
        "/api/v1/events", data="[]", content_type="application/cloudevents-batch+json"
    )
    assert response.status_code == 401


def test_wrong_key_is_401(acme, api):
    assert post_events(api, "nope.nothing", [_good()]).status_code == 401


def test_revoked_key_is_401(acme, api):
    from yoco.accounts.models import ClusterKey

    ClusterKey.objects.update(revoked=True)
    assert post_events(api, acme.cluster_keys["east"], [_good()]).status_code == 401


def test_read_token_cannot_ingest(acme, api):
    assert post_events(api, acme.read_token, [_good()]).status_code == 403
