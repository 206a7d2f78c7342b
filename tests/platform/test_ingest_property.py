"""Property: whatever JSON value a client puts in any attribute or data field of an event, the
answer is never a 5xx, and the valid event sent beside it is stored and processed."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import cloud_event
from tests.platform.hostile import assert_kept_and_processed, good_incident, post_text

HOSTILE_STRINGS = st.sampled_from([
    "\ud800", "a\u0000b", "\x7f", "x" * 301, "２０２６-09-01T00:00:00Z",
    "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "2026-03-01T10:00:00Z\n",
    "/clusters/east/jobs/j", "1.0", "io.yoco.failure.detected", "fail_slow", "standby", "",
])  # fmt: skip
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([2**53 - 1, 2**53, 2**31, 10**19, -1, 0])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | HOSTILE_STRINGS
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=8,
)  # fmt: skip

TEMPLATES = [
    cloud_event("job.started", framework="pytorch", world_size=8, gpus=8, spares=1,
                parallelism={"dp": 2, "tp": 4}),
    cloud_event("failure.detected", subject="p", trigger="unplanned", category="fail_slow",
                rank=1, step=2),
    cloud_event("migration.started", subject="p", mode="model_aware", state_source="self",
                spare="standby", source={"node": "a", "rank": 1}),
    cloud_event("migration.completed", subject="p", steps_lost=0, duration_ms=5, verified=True),
    cloud_event("checkpoint.restored", subject="p", steps_lost=3),
    cloud_event("job.resumed", subject="p", step=3, downtime_ms=10),
    cloud_event("job.finished", status="completed", step=9),
]  # fmt: skip
ATTRIBUTES = ["specversion", "id", "source", "type", "time", "subject", "data", "ext"]
DATA_FIELDS = sorted({field for event in TEMPLATES for field in event["data"]} | {"extra"})


@st.composite
def events(draw):
    event = json.loads(json.dumps(draw(st.sampled_from(TEMPLATES))))
    event["id"] = f"prop-{draw(st.integers(0, 10**9))}"
    for name, value in draw(
        st.dictionaries(st.sampled_from(ATTRIBUTES), VALUES, max_size=2)
    ).items():
        event[name] = value
    if isinstance(event.get("data"), dict):
        changes = draw(st.dictionaries(st.sampled_from(DATA_FIELDS), VALUES, max_size=3))
        event["data"].update(changes)
    return event


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(event=events())
def test_any_value_in_any_field_never_gets_a_5xx(acme, api, event):
    good = good_incident()[:1]
    text = json.dumps([good[0], event], allow_nan=True)
    response = post_text(api, acme.cluster_keys["east"], text)
    assert response.status_code in (200, 207), response.content[:300]
    results = response.json()["results"]
    assert results[0]["status"] == "accepted"
    assert results[1]["status"] in ("accepted", "duplicate", "conflict", "rejected")
    assert_kept_and_processed(good)
