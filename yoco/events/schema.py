"""Validation of one CloudEvent against SPEC section 3.

`parse_event` either returns a `ParsedEvent` or raises `InvalidEvent` whose message says exactly
what is wrong; it never touches the database. Everything it admits can be stored and processed:
ids and sources fit their columns, integers fit a bigint, times fit a datetime after any offset,
and no string or number is one PostgreSQL's jsonb refuses (U+0000, a lone surrogate, NaN).
"""

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from yoco.events.json_body import OversizedInt
from yoco.lib import vocabulary
from yoco.lib.vocabulary import (
    CATEGORIES,
    FRAMEWORKS,
    JOB_STATUSES,
    MODES,
    SCOPES,
    SPARES,
    STATE_SOURCES,
    TRIGGERS,
)

# The largest integer JSON carries exactly everywhere (I-JSON, RFC 7493); it fits a bigint.
MAX_INT = 2**53 - 1
MAX_ID_CHARS = 200  # id and subject
MAX_SOURCE_CHARS = 300

# Field kinds: ("int",) a JSON integer 0 … MAX_INT; ("str",) a string; ("bool",) true/false;
# ("enum", values); ("obj", fields); ("sizes",) an object of names → integers 1 … MAX_INT.
INT, STR, BOOL, SIZES = ("int",), ("str",), ("bool",), ("sizes",)


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
        "spares": (INT, False),
        "parallelism": (SIZES, False),
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
        "spare": (_enum(SPARES), False),
    },
    vocabulary.MIGRATION_COMPLETED: {
        "steps_lost": (INT, True),
        "duration_ms": (INT, True),
        "bytes": (INT, False),
        "recompute_ms": (INT, False),
        "resumed_step": (INT, False),
        "verified": (BOOL, False),
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

# All matched whole (fullmatch): "$" would let a trailing newline through.
SOURCE_RE = re.compile(r"/clusters/(?P<cluster>[^/\s]+)/jobs/(?P<job>[^/\s]+)")
# ASCII digits only: "\d" would take fullwidth and other Unicode digits.
TIME_RE = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:(?P<z>[Zz])|(?P<sign>[+-])(?P<oh>[0-9]{2}):(?P<om>[0-9]{2}))"
)
# CloudEvents context attribute names: lower-case letters and digits.
ATTRIBUTE_NAME_RE = re.compile(r"[a-z0-9]{1,20}")
# Not in an id, subject or source: control characters and (lone) surrogates. JSON decoding
# joins every valid surrogate pair, so a surrogate left in a string is an unpaired one.
NOT_IN_NAMES = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")
# Not in any stored string: PostgreSQL refuses U+0000, and a lone surrogate is not UTF-8.
NOT_STORABLE = re.compile("[\x00\ud800-\udfff]")

KNOWN_ATTRIBUTES = {
    "specversion", "id", "source", "type", "time", "subject", "data", "datacontenttype",
    "dataschema",
}  # fmt: skip


class InvalidEvent(ValueError):
    pass


def _show(value: Any) -> str:
    """A value for an error message: its repr (escapes control characters and surrogates),
    shortened."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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
    """RFC 3339 with a mandatory offset, returned in UTC to the microsecond; the instant must
    lie within the years 0001–9999 in UTC."""
    if not isinstance(value, str):
        raise InvalidEvent(f"time must be an RFC 3339 string, got {_show(value)}")
    match = TIME_RE.fullmatch(value)
    if not match:
        raise InvalidEvent(
            f"time {_show(value)} is not RFC 3339 with an offset (e.g. 2026-01-31T12:00:00Z)"
        )
    year, month, day, hour, minute, second, fraction = match.groups()[:7]
    if match.group("z"):
        tz = UTC
    else:
        sign = 1 if match.group("sign") == "+" else -1
        off_h, off_m = int(match.group("oh")), int(match.group("om"))
        if off_h > 23 or off_m > 59:
            raise InvalidEvent(f"time {_show(value)} has an impossible offset")
        tz = timezone(sign * timedelta(hours=off_h, minutes=off_m))
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    try:
        local = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tz
        )
    except ValueError as exc:
        raise InvalidEvent(f"time {_show(value)} is not a valid date and time: {exc}") from None
    try:
        return local.astimezone(UTC)
    except OverflowError:
        raise InvalidEvent(
            f"time {_show(value)} is outside the years 0001-9999 once in UTC"
        ) from None


def _check_value(path: str, value: Any, kind: tuple) -> None:
    name = kind[0]
    if name == "int":
        _check_int(path, value, minimum=0)
    elif name == "str":
        if not isinstance(value, str):
            raise InvalidEvent(f"{path} must be a string, got {_show(value)}")
    elif name == "bool":
        if not isinstance(value, bool):
            raise InvalidEvent(f"{path} must be true or false, got {_show(value)}")
    elif name == "str_or_int":
        if isinstance(value, str):
            return
        _check_int(path, value, minimum=0, what="a string or an integer")
    elif name == "enum":
        if not isinstance(value, str) or value not in kind[1]:
            allowed = ", ".join(kind[1])
            raise InvalidEvent(f"{path} {_show(value)} is not one of: {allowed}")
    elif name == "obj":
        if not isinstance(value, dict):
            raise InvalidEvent(f"{path} must be an object, got {_show(value)}")
        _check_fields(path, value, kind[1])
    elif name == "sizes":
        if not isinstance(value, dict) or not value:
            raise InvalidEvent(f"{path} must be an object of names to sizes, got {_show(value)}")
        for dimension, size in value.items():
            if not dimension:
                raise InvalidEvent(f"{path} has an empty dimension name")
            _check_int(f"{path}[{_show(dimension)}]", size, minimum=1)


def _check_int(path: str, value: Any, *, minimum: int, what: str = "an integer") -> None:
    # bool is an int in Python but not in JSON.
    if isinstance(value, OversizedInt) or (
        isinstance(value, int) and not isinstance(value, bool) and value > MAX_INT
    ):
        raise InvalidEvent(f"{path} {_show(value)} is above the largest integer, 2^53-1")
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidEvent(f"{path} must be {what}, got {_show(value)}")
    if value < minimum:
        raise InvalidEvent(f"{path} must be >= {minimum}, got {value}")


def _check_fields(path: str, data: dict, fields: dict[str, tuple[tuple, bool]]) -> None:
    for field, (kind, required) in fields.items():
        value = data.get(field)
        if value is None:
            if required:
                raise InvalidEvent(f"{path}.{field} is required")
            continue
        _check_value(f"{path}.{field}", value, kind)


def _name(path: str, value: Any, max_chars: int) -> str:
    """An id, subject or source: 1 to `max_chars` characters, no control characters."""
    if not isinstance(value, str) or not value:
        raise InvalidEvent(f"{path} must be a non-empty string, got {_show(value)}")
    if len(value) > max_chars:
        raise InvalidEvent(f"{path} is {len(value)} characters long; the limit is {max_chars}")
    bad = NOT_IN_NAMES.search(value)
    if bad:
        raise InvalidEvent(f"{path} holds the character {_show(bad.group())}, which is not allowed")
    return value


def _required_name(event: dict, name: str, max_chars: int) -> str:
    if name not in event:
        raise InvalidEvent(f"attribute {name!r} is required")
    return _name(f"attribute {name!r}", event[name], max_chars)


def _check_storable(event: dict) -> None:
    """Every string, key and number anywhere in the event (extra data fields and extension
    attributes too) can be stored as jsonb and read back as it was sent."""
    stack: list[tuple[str, Any]] = [("event", event)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                _check_string(f"{path} key", key)
                stack.append((f"{path}.{key}" if key.isidentifier() else f"{path}[{_show(key)}]",
                              item))  # fmt: skip
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
        elif isinstance(value, str):
            _check_string(path, value)
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise InvalidEvent(f"{path} is {_show(value)}: only finite numbers are allowed")
        elif isinstance(value, OversizedInt) or (
            isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT
        ):
            raise InvalidEvent(f"{path} {_show(value)} is beyond ±(2^53-1)")


def _check_string(path: str, value: str) -> None:
    bad = NOT_STORABLE.search(value)
    if bad:
        kind = "U+0000" if bad.group() == "\x00" else "an unpaired surrogate"
        raise InvalidEvent(f"{path} holds {kind}, which cannot be stored")


def parse_event(event: Any) -> ParsedEvent:
    if not isinstance(event, dict):
        raise InvalidEvent(f"an event must be a JSON object, got {type(event).__name__}")
    # First, so that every message below may quote what the event holds.
    _check_storable(event)
    specversion = event.get("specversion")
    if specversion != "1.0":
        raise InvalidEvent(f'specversion must be "1.0", got {_show(specversion)}')
    event_id = _required_name(event, "id", MAX_ID_CHARS)
    source = _required_name(event, "source", MAX_SOURCE_CHARS)
    source_match = SOURCE_RE.fullmatch(source)
    if not source_match:
        raise InvalidEvent(f"source {_show(source)} is not /clusters/{{cluster}}/jobs/{{job}}")
    if "type" not in event:
        raise InvalidEvent("attribute 'type' is required")
    event_type = event["type"]
    if not isinstance(event_type, str) or event_type not in DATA_FIELDS:
        raise InvalidEvent(f"unknown type {_show(event_type)}")
    if "time" not in event:
        raise InvalidEvent("attribute 'time' is required")
    time = parse_time(event["time"])

    subject = event.get("subject")
    if subject is not None:
        _name("subject", subject, MAX_ID_CHARS)
    if subject is None and event_type in SUBJECT_REQUIRED:
        raise InvalidEvent(f"subject (the incident id) is required on {event_type}")

    for name, value in event.items():
        if name in KNOWN_ATTRIBUTES:
            continue
        if name == "data_base64":
            raise InvalidEvent("data_base64 is not accepted: send data as a JSON object")
        if not ATTRIBUTE_NAME_RE.fullmatch(name):
            raise InvalidEvent(
                f"attribute name {_show(name)} is not a CloudEvents name (a-z, 0-9, at most 20)"
            )
        if value is not None and (isinstance(value, dict | list)):
            raise InvalidEvent(f"extension attribute {name!r} must be a scalar")
    for name in ("datacontenttype", "dataschema"):
        if name in event and not isinstance(event[name], str):
            raise InvalidEvent(f"attribute {name!r} must be a string")
    content_type = event.get("datacontenttype")
    if content_type is not None and not content_type.startswith("application/json"):
        raise InvalidEvent(f"datacontenttype must be application/json, got {_show(content_type)}")

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
