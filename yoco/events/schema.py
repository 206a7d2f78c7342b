"""Validation of one CloudEvent against SPEC section 3.

`parse_event` either returns a `ParsedEvent` or raises `InvalidEvent` whose message says exactly
what is wrong; it never touches the database.
"""

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from yoco.lib import vocabulary
from yoco.lib.vocabulary import (
    CATEGORIES,
    FRAMEWORKS,
    JOB_STATUSES,
    MODES,
    SCOPES,
    STATE_SOURCES,
    TRIGGERS,
)

# Field kinds: ("int",) a JSON integer >= 0; ("str",) a string; ("enum", values); ("obj", fields)
INT, STR = ("int",), ("str",)


def _enum(values):
    return ("enum", values)


# type → {field: (kind, required)}
DATA_FIELDS: dict[str, dict[str, tuple[tuple, bool]]] = {
    vocabulary.JOB_STARTED: {
        "framework": (_enum(FRAMEWORKS), True),
        "world_size": (INT, True),
        "model": (STR, False),
        "gpus": (INT, False),
        "mode": (_enum(MODES), False),
    },
    vocabulary.JOB_FINISHED: {"status": (_enum(JOB_STATUSES), True), "step": (INT, False)},
    vocabulary.FAILURE_DETECTED: {
        "trigger": (_enum(TRIGGERS), True),
        "category": (_enum(CATEGORIES), True),
        "rank": (INT, False),
        "node": (STR, False),
        "device": (("str_or_int",), False),
        "step": (INT, False),
        "xid": (INT, False),
        "detail": (STR, False),
        "scope": (_enum(SCOPES), False),
    },
    vocabulary.MIGRATION_STARTED: {
        "mode": (_enum(MODES), True),
        "state_source": (_enum(STATE_SOURCES), True),
        "source": (("obj", {"node": (STR, False), "rank": (INT, False)}), False),
        "target": (("obj", {"node": (STR, False)}), False),
        "bytes": (INT, False),
    },
    vocabulary.MIGRATION_COMPLETED: {
        "steps_lost": (INT, True),
        "duration_ms": (INT, True),
        "bytes": (INT, False),
        "recompute_ms": (INT, False),
        "resumed_step": (INT, False),
    },
    vocabulary.MIGRATION_FAILED: {"reason": (STR, True)},
    vocabulary.CHECKPOINT_RESTORED: {
        "steps_lost": (INT, True),
        "checkpoint_step": (INT, False),
        "duration_ms": (INT, False),
    },
    vocabulary.JOB_RESUMED: {"step": (INT, True), "downtime_ms": (INT, False)},
}
SUBJECT_REQUIRED = frozenset(vocabulary.INCIDENT_EVENT_TYPES)

SOURCE_RE = re.compile(r"^/clusters/(?P<cluster>[^/\s]+)/jobs/(?P<job>[^/\s]+)$")
TIME_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:(?P<z>[Zz])|(?P<sign>[+-])(?P<oh>\d{2}):(?P<om>\d{2}))$"
)
# CloudEvents context attribute names: lower-case letters and digits.
ATTRIBUTE_NAME_RE = re.compile(r"^[a-z0-9]{1,20}$")
KNOWN_ATTRIBUTES = {
    "specversion", "id", "source", "type", "time", "subject", "data", "datacontenttype",
    "dataschema",
}  # fmt: skip


class InvalidEvent(ValueError):
    pass


@dataclass(frozen=True)
class ParsedEvent:
    id: str
    source: str
    cluster: str
    type: str
    time: datetime
    subject: str | None
    data: dict[str, Any]


def parse_time(value: Any) -> datetime:
    """RFC 3339 with a mandatory offset, returned in UTC to the microsecond."""
    if not isinstance(value, str):
        raise InvalidEvent("time must be an RFC 3339 string")
    match = TIME_RE.match(value)
    if not match:
        raise InvalidEvent(
            f"time {value!r} is not RFC 3339 with an offset (e.g. 2026-01-31T12:00:00Z)"
        )
    year, month, day, hour, minute, second, fraction = match.groups()[:7]
    if match.group("z"):
        tz = UTC
    else:
        sign = 1 if match.group("sign") == "+" else -1
        off_h, off_m = int(match.group("oh")), int(match.group("om"))
        if off_h > 23 or off_m > 59:
            raise InvalidEvent(f"time {value!r} has an impossible offset")
        tz = timezone(sign * timedelta(hours=off_h, minutes=off_m))
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    try:
        local = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tz
        )
    except ValueError as exc:
        raise InvalidEvent(f"time {value!r} is not a valid date and time: {exc}") from None
    return local.astimezone(UTC)


def _check_value(path: str, value: Any, kind: tuple) -> None:
    name = kind[0]
    if name == "int":
        # bool is an int in Python but not in JSON.
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidEvent(f"{path} must be an integer, got {value!r}")
        if value < 0:
            raise InvalidEvent(f"{path} must be >= 0, got {value}")
    elif name == "str":
        if not isinstance(value, str):
            raise InvalidEvent(f"{path} must be a string, got {value!r}")
    elif name == "str_or_int":
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise InvalidEvent(f"{path} must be a string or an integer, got {value!r}")
    elif name == "enum":
        if value not in kind[1]:
            allowed = ", ".join(kind[1])
            raise InvalidEvent(f"{path} {value!r} is not one of: {allowed}")
    elif name == "obj":
        if not isinstance(value, dict):
            raise InvalidEvent(f"{path} must be an object, got {value!r}")
        _check_fields(path, value, kind[1])


def _check_fields(path: str, data: dict, fields: dict[str, tuple[tuple, bool]]) -> None:
    for field, (kind, required) in fields.items():
        value = data.get(field)
        if value is None:
            if required:
                raise InvalidEvent(f"{path}.{field} is required")
            continue
        _check_value(f"{path}.{field}", value, kind)


def _required_string(event: dict, name: str) -> str:
    if name not in event:
        raise InvalidEvent(f"attribute {name!r} is required")
    value = event[name]
    if not isinstance(value, str) or not value:
        raise InvalidEvent(f"attribute {name!r} must be a non-empty string, got {value!r}")
    return value


def parse_event(event: Any) -> ParsedEvent:
    if not isinstance(event, dict):
        raise InvalidEvent(f"an event must be a JSON object, got {type(event).__name__}")
    specversion = event.get("specversion")
    if specversion != "1.0":
        raise InvalidEvent(f'specversion must be "1.0", got {specversion!r}')
    event_id = _required_string(event, "id")
    source = _required_string(event, "source")
    source_match = SOURCE_RE.match(source)
    if not source_match:
        raise InvalidEvent(f"source {source!r} is not /clusters/{{cluster}}/jobs/{{job}}")
    event_type = _required_string(event, "type")
    if event_type not in DATA_FIELDS:
        raise InvalidEvent(f"unknown type {event_type!r}")
    if "time" not in event:
        raise InvalidEvent("attribute 'time' is required")
    time = parse_time(event["time"])

    subject = event.get("subject")
    if subject is not None and (not isinstance(subject, str) or not subject):
        raise InvalidEvent(f"subject must be a non-empty string, got {subject!r}")
    if subject is None and event_type in SUBJECT_REQUIRED:
        raise InvalidEvent(f"subject (the incident id) is required on {event_type}")

    for name, value in event.items():
        if name in KNOWN_ATTRIBUTES:
            continue
        if name == "data_base64":
            raise InvalidEvent("data_base64 is not accepted: send data as a JSON object")
        if not ATTRIBUTE_NAME_RE.match(name):
            raise InvalidEvent(f"attribute name {name!r} is not a CloudEvents name (a-z, 0-9)")
        if value is not None and (isinstance(value, dict | list)):
            raise InvalidEvent(f"extension attribute {name!r} must be a scalar")
    for name in ("datacontenttype", "dataschema"):
        if name in event and not isinstance(event[name], str):
            raise InvalidEvent(f"attribute {name!r} must be a string")
    content_type = event.get("datacontenttype")
    if content_type is not None and not content_type.startswith("application/json"):
        raise InvalidEvent(f"datacontenttype must be application/json, got {content_type!r}")

    if "data" not in event:
        raise InvalidEvent("attribute 'data' is required")
    data = event["data"]
    if not isinstance(data, dict):
        raise InvalidEvent(f"data must be a JSON object, got {type(data).__name__}")
    _check_fields("data", data, DATA_FIELDS[event_type])

    return ParsedEvent(
        id=event_id,
        source=source,
        cluster=source_match.group("cluster"),
        type=event_type,
        time=time,
        subject=subject,
        data=data,
    )
