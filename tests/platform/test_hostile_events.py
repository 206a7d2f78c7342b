"""Hostile events (SPEC 3 limits, issue 11): each one is `rejected` with its reason, never a
5xx, and the valid events around it in the same batch are stored and processed."""

import pytest

from tests.conftest import cloud_event
from tests.platform.hostile import assert_kept_and_processed, body, good_incident, post_text, raw

HUGE = raw("9" * 5000)  # past Python's 4,300-digit int conversion limit
SOURCE = "/clusters/east/jobs/"


def started(**data):
    return cloud_event("job.started", **{"framework": "pytorch", "world_size": 8, **data})


def detected(**data):
    return cloud_event(
        "failure.detected", subject="bad", **{"trigger": "unplanned", "category": "gpu_xid", **data}
    )


def migrated(**data):
    return cloud_event(
        "migration.started",
        subject="bad",
        **{"mode": "model_aware", "state_source": "self", **data},
    )


def completed(**data):
    return cloud_event(
        "migration.completed", subject="bad", **{"steps_lost": 0, "duration_ms": 5, **data}
    )


def resumed(**data):
    return cloud_event("job.resumed", subject="bad", **{"step": 3, **data})


def attrs(event, **attributes):
    return {**event, **attributes}


BAD_EVENTS = {
    # id, subject, source: lengths and characters
    "id of 201 characters": lambda: attrs(started(), id="i" * 201),
    "empty id": lambda: attrs(started(), id=""),
    "id with U+0000": lambda: attrs(started(), id="a\u0000b"),
    "id with a newline": lambda: attrs(started(), id="a\nb"),
    "id with U+001F": lambda: attrs(started(), id="a\u001fb"),
    "id with U+007F": lambda: attrs(started(), id="a\u007fb"),
    "id with a lone high surrogate": lambda: attrs(started(), id="a\ud800"),
    "id with a lone low surrogate": lambda: attrs(started(), id="\udc00a"),
    "subject of 201 characters": lambda: detected() | {"subject": "s" * 201},
    "empty subject": lambda: detected() | {"subject": ""},
    "subject with a tab": lambda: detected() | {"subject": "a\tb"},
    "subject with a lone surrogate": lambda: detected() | {"subject": "\ud83d"},
    "subject not a string": lambda: detected() | {"subject": 7},
    "source of 301 characters": lambda: attrs(started(), source=SOURCE + "j" * 281),
    "source with U+0000": lambda: attrs(started(), source=SOURCE + "j\u0000"),
    "source with a trailing newline": lambda: attrs(started(), source=SOURCE + "job-1\n"),
    "source with U+007F": lambda: attrs(started(), source=SOURCE + "job\u007f"),
    # integers within 0 … 2^53 - 1
    "world_size 2^53": lambda: started(world_size=2**53),
    "gpus 10^30": lambda: started(gpus=10**30),
    "spares 2^64": lambda: started(spares=2**64),
    "world_size of 5,000 digits": lambda: started(world_size=HUGE),
    "downtime_ms 10^19": lambda: resumed(downtime_ms=10**19),
    "step 2^53": lambda: resumed(step=2**53),
    "steps_lost 2^63": lambda: completed(steps_lost=2**63),
    "duration_ms of 5,000 digits": lambda: completed(duration_ms=HUGE),
    "bytes 2^53": lambda: completed(bytes=2**53),
    "recompute_ms -1": lambda: completed(recompute_ms=-1),
    "resumed_step 1.0": lambda: completed(resumed_step=1.0),
    "xid 2^53": lambda: detected(xid=2**53),
    "rank -1": lambda: detected(rank=-1),
    "device 2^60": lambda: detected(device=2**60),
    "migration source rank 2^53": lambda: migrated(source={"node": "n", "rank": 2**53}),
    "migration bytes of 5,000 digits": lambda: migrated(bytes=HUGE),
    "checkpoint_step 2^53": lambda: cloud_event(
        "checkpoint.restored", subject="bad", steps_lost=1, checkpoint_step=2**53
    ),
    "job.finished step 2^53": lambda: cloud_event("job.finished", status="completed", step=2**53),
    "extra data integer of 5,000 digits": lambda: started(extra=HUGE),
    "extra data integer 2^53": lambda: started(extra=2**53),
    "extension integer of 5,000 digits": lambda: attrs(started(), traceid=HUGE),
    # time: ASCII digits, an offset, an instant within 0001–9999 in UTC
    "time with fullwidth digits": lambda: attrs(started(), time="２０２６-09-01T00:00:00Z"),
    "time with Arabic-Indic digits": lambda: attrs(started(), time="٢٠٢٦-09-01T00:00:00Z"),
    "time before year 1 in UTC": lambda: attrs(started(), time="0001-01-01T00:00:00+01:00"),
    "time after year 9999 in UTC": lambda: attrs(started(), time="9999-12-31T23:59:59-01:00"),
    "time in year 0": lambda: attrs(started(), time="0000-06-01T00:00:00Z"),
    "time with a trailing newline": lambda: attrs(started(), time="2026-03-01T10:00:00Z\n"),
    "time without an offset": lambda: attrs(started(), time="2026-03-01T10:00:00"),
    "time with an impossible offset": lambda: attrs(started(), time="2026-03-01T10:00:00+24:00"),
    "time not a string": lambda: attrs(started(), time=1767225600),
    # numbers that are not finite, anywhere
    "NaN in world_size": lambda: started(world_size=raw("NaN")),
    "1e999 in downtime_ms": lambda: resumed(downtime_ms=raw("1e999")),
    "NaN in an extra data field": lambda: started(extra=raw("NaN")),
    "Infinity in an extra data field": lambda: started(extra=raw("Infinity")),
    "-Infinity nested in extra data": lambda: started(extra={"a": [1, raw("-Infinity")]}),
    "1e999 in an extra data field": lambda: started(extra=raw("1e999")),
    "NaN in an extension attribute": lambda: attrs(started(), sampled=raw("NaN")),
    "1e999 in an extension attribute": lambda: attrs(started(), sampled=raw("-1e999")),
    # strings PostgreSQL's jsonb refuses
    "U+0000 in data.detail": lambda: detected(detail="gpu\u0000fell off"),
    "U+0000 in a data key": lambda: started(**{"ex\u0000tra": 1}),
    "U+0000 in nested extra data": lambda: started(extra={"list": ["ok", "n\u0000"]}),
    "U+0000 in an extension attribute": lambda: attrs(started(), traceparent="a\u0000"),
    "lone surrogate in data.model": lambda: started(model="gpt\ud800"),
    "lone surrogate in a data key": lambda: started(**{"\udfff": 1}),
    "lone surrogate in an extension attribute": lambda: attrs(started(), note="\udbff"),
    "lone surrogate in datacontenttype": lambda: attrs(started(), datacontenttype="\ud800"),
    "extension attribute name with a newline": lambda: attrs(started(), **{"abc\n": 1}),
    "extension attribute name of 21 characters": lambda: attrs(started(), **{"a" * 21: 1}),
    "type not a string": lambda: attrs(started(), type=["io.yoco.job.started"]),
    # the new optional fields
    "spares negative": lambda: started(spares=-1),
    "spares a string": lambda: started(spares="2"),
    "parallelism not an object": lambda: started(parallelism=[2, 4]),
    "parallelism empty": lambda: started(parallelism={}),
    "parallelism size 0": lambda: started(parallelism={"tp": 0}),
    "parallelism size a string": lambda: started(parallelism={"dp": "2"}),
    "parallelism size true": lambda: started(parallelism={"dp": True}),
    "parallelism size 2^53": lambda: started(parallelism={"dp": 2**53}),
    "parallelism empty name": lambda: started(parallelism={"": 2}),
    "spare unknown": lambda: migrated(spare="hot"),
    "spare not a string": lambda: migrated(spare={"kind": "standby"}),
    "verified a string": lambda: completed(verified="yes"),
    "verified 1": lambda: completed(verified=1),
    "category unknown": lambda: detected(category="slow"),
    "category a list": lambda: detected(category=["fail_slow"]),
}


@pytest.mark.parametrize("case", sorted(BAD_EVENTS))
def test_bad_event_rejected_and_valid_ones_beside_it_processed(acme, api, case):
    before, after = good_incident(), good_incident()
    bad = BAD_EVENTS[case]()
    response = post_text(api, acme.cluster_keys["east"], body([*before, bad, *after]))
    assert response.status_code == 207, response.content[:500]
    answer = response.json()
    statuses = [r["status"] for r in answer["results"]]
    assert statuses == ["accepted"] * 3 + ["rejected"] + ["accepted"] * 3
    assert answer["results"][3]["error"]
    assert answer["accepted"] == 6 and answer["rejected"] == 1
    assert_kept_and_processed([*before, *after])


def test_rejection_reasons_name_the_limit(acme, api):
    cases = [
        (attrs(started(), id="i" * 201), "201 characters long; the limit is 200"),
        (started(world_size=2**53), "2^53-1"),
        (started(world_size=HUGE), "5000 digits"),
        (attrs(started(), time="0001-01-01T00:00:00+01:00"), "0001-9999"),
        (started(extra=raw("NaN")), "finite"),
        (detected(detail="a\u0000"), "U+0000"),
        (started(model="\ud800"), "unpaired surrogate"),
    ]
    response = post_text(api, acme.cluster_keys["east"], body([event for event, _ in cases]))
    errors = [r["error"] for r in response.json()["results"]]
    for error, (_, expected) in zip(errors, cases, strict=True):
        assert expected in error, error


def test_lone_surrogate_id_is_answered_without_echoing_it(acme, api):
    response = post_text(api, acme.cluster_keys["east"], body([attrs(started(), id="\ud800")]))
    assert response.status_code == 207
    assert response.json()["results"][0] == {
        "index": 0,
        "id": None,
        "status": "rejected",
        "error": response.json()["results"][0]["error"],
    }
