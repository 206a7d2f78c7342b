"""Hostile request bodies (SPEC 3 and 5): too deep → 400 before any parsing can recurse; no
length → 411; not UTF-8 → 400. Never a 5xx, and nothing stored from a refused request."""

import json

import pytest

from tests.platform.hostile import (
    assert_kept_and_processed,
    body,
    good_incident,
    post_text,
    raw,
)
from yoco.events import json_body
from yoco.events.models import Event


def nested(depth: int, events=None) -> str:
    """A batch nested `depth` levels deep (the batch array is level 1)."""
    events = events or good_incident()
    # batch, event, data: three levels; the rest are arrays in an extra data field.
    events[-1]["data"]["extra"] = raw("[" * (depth - 3) + "]" * (depth - 3))
    return body(events)


@pytest.mark.parametrize("depth", [33, 1_000, 100_000, 2_000_000])
def test_too_deep_is_400_and_nothing_stored(acme, api, depth):
    text = nested(depth)
    assert json_body.nesting_depth(text.encode()) == depth
    response = post_text(api, acme.cluster_keys["east"], text)
    assert response.status_code == 400
    assert "nested" in response.json()["detail"]
    assert Event.objects.count() == 0


def test_deep_objects_are_counted_like_arrays(acme, api):
    text = '[{"a":' * 40 + "1" + "}]" * 40
    response = post_text(api, acme.cluster_keys["east"], text)
    assert response.status_code == 400


def test_32_levels_is_read(acme, api):
    events = good_incident()
    text = nested(32, events)
    assert json_body.nesting_depth(text.encode()) == 32
    response = post_text(api, acme.cluster_keys["east"], text)
    assert response.status_code == 200, response.content[:300]
    assert_kept_and_processed(events)


def test_brackets_inside_strings_do_not_count(acme, api):
    events = good_incident()
    events[0]["data"]["detail"] = '[[[[{{{{"\\' * 50
    response = post_text(api, acme.cluster_keys["east"], body(events))
    assert response.status_code == 200
    assert_kept_and_processed(events)


@pytest.mark.parametrize(
    "text",
    [
        '["' + '\\"' * 200_000,  # an unterminated string full of escaped quotes
        '"' * 200_001,
        "[" + '"\\' * 100_000,
        "{not json",
    ],
    ids=["escaped quotes", "quotes", "backslashes", "not json"],
)
def test_unreadable_body_is_400(acme, api, text):
    response = post_text(api, acme.cluster_keys["east"], text)
    assert response.status_code == 400


def test_empty_body_with_length_0_is_400(acme, api):
    response = post_text(api, acme.cluster_keys["east"], "", CONTENT_LENGTH="0")
    assert response.status_code == 400


def test_not_utf8_is_400(acme, api):
    text = body(good_incident()).encode().replace(b"gpu_xid", b"gpu_\xff\xfe")
    response = post_text(api, acme.cluster_keys["east"], text)
    assert response.status_code == 400
    assert "UTF-8" in response.json()["detail"]


def test_utf16_body_is_400(acme, api):
    response = post_text(api, acme.cluster_keys["east"], body(good_incident()).encode("utf-16"))
    assert response.status_code == 400


def test_body_without_a_length_is_411(acme, api):
    """What a `Transfer-Encoding: chunked` request looks like to the application: no
    CONTENT_LENGTH (the real server's case is in tests/e2e/test_ingest_kill9.py)."""
    from django.test import RequestFactory

    from yoco.events.api.views import EventIngestView

    request = RequestFactory().post(
        "/api/v1/events",
        data=body(good_incident()),
        content_type="application/cloudevents-batch+json",
        HTTP_AUTHORIZATION=f"Bearer {acme.cluster_keys['east']}",
    )
    del request.META["CONTENT_LENGTH"]
    response = EventIngestView.as_view()(request)
    assert response.status_code == 411
    assert "Content-Length" in response.data["detail"]
    assert Event.objects.count() == 0


def test_content_length_not_a_number_is_400(acme, api):
    response = post_text(
        api, acme.cluster_keys["east"], json.dumps(good_incident()), CONTENT_LENGTH="12abc"
    )
    assert response.status_code == 400


def test_single_event_with_a_huge_integer_is_rejected_not_a_500(acme, api):
    event = good_incident()[0]
    text = json.dumps(event).replace('"gpu_xid"', '"gpu_xid", "xid": ' + "7" * 10_000)
    response = post_text(api, acme.cluster_keys["east"], text, "application/cloudevents+json")
    assert response.status_code == 207
    assert response.json()["results"][0]["status"] == "rejected"
