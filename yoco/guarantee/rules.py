"""The guarantee's rules (SPEC sections 3 and 4) as pure functions.

Nothing here touches Django or the database: callers load what they need, hand it over as
plain values and store what comes back. Every rule that decides an incident's outcome, a
contract year, compliance or a credit amount lives in this module, so that it can be tested
exhaustively and versioned (``RULES_VERSION`` goes into every credit's evidence snapshot).

Money and ratios use exact arithmetic (``Decimal`` and ``fractions.Fraction``); floats appear
only in the purely informative Clopper-Pearson interval.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from functools import cache
from typing import Any

from yoco.lib import savings
from yoco.lib.vocabulary import (
    CHECKPOINT_RESTORED,
    ELIGIBLE,
    EXCLUDED,
    FAILED,
    FAILURE_DETECTED,
    FRAMEWORKS,
    JOB_RESUMED,
    LIVE_RESOLVED,
    MIGRATION_COMPLETED,
    MIGRATION_FAILED,
    OUTCOMES,
    PENDING,
    PLANNED,
    ROLLED_BACK,
    SCOPE_NETWORK_WIDE,
    SCOPE_NODE,
    TRIGGER_PLANNED,
)

# Bump whenever a rule below changes what it decides, and release the new version in
# `RELEASED_RULES` (at the end): stored in every closed year's evidence snapshot.
RULES_VERSION = "1"

# --- Contract defaults (SPEC 4.1): the one place they are written --------------------------

DEFAULT_SUPPORTED_FRAMEWORKS = frozenset(FRAMEWORKS)
DEFAULT_EXCLUDED_CATEGORIES = frozenset({"software_user", "sdc"})
DEFAULT_DEADLINE_MINUTES = 15
DEFAULT_DEADLINE = timedelta(minutes=DEFAULT_DEADLINE_MINUTES)
# The last representable instant: a deadline past it is clamped to it.
LAST_INSTANT = datetime.max.replace(tzinfo=UTC)
DEFAULT_TARGET = Decimal("90")
DEFAULT_CREDIT_RATE = Decimal("25")
DEFAULT_GRACE_DAYS = 7
# "Progress protected" (SPEC 4.6): the savings model's defaults.
DEFAULT_CHECKPOINT_INTERVAL_MINUTES = int(savings.DEFAULT_CHECKPOINT_INTERVAL_HOURS * 60)
DEFAULT_RESTART_MINUTES = int(savings.DEFAULT_RESTART_MINUTES)
DEFAULT_GPU_HOUR_PRICE = Decimal("2")


def _require_aware(value: datetime, what: str) -> None:
    if not isinstance(value, datetime):
        raise TypeError(f"{what} must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware, got naive {value.isoformat()}")


@dataclass(frozen=True)
class EventFact:
    """One stored, already validated event."""

    id: str
    source: str
    type: str
    time: datetime
    data: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _require_aware(self.time, f"event {self.id!r} time")


@dataclass(frozen=True)
class Terms:
    """The contract terms the rules need. Any iterable of names is accepted."""

    deadline: timedelta = DEFAULT_DEADLINE
    supported_frameworks: frozenset[str] = DEFAULT_SUPPORTED_FRAMEWORKS
    excluded_categories: frozenset[str] = DEFAULT_EXCLUDED_CATEGORIES

    def __post_init__(self) -> None:
        if not isinstance(self.deadline, timedelta):
            raise TypeError("deadline must be a timedelta")
        if self.deadline < timedelta(0):
            raise ValueError(f"deadline must not be negative, got {self.deadline}")
        for name in ("supported_frameworks", "excluded_categories"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise TypeError(f"{name} must be a collection of names, not a string")
            object.__setattr__(self, name, frozenset(value))


@dataclass(frozen=True)
class Detection:
    """What the incident's earliest ``failure.detected`` says."""

    time: datetime
    trigger: str
    category: str
    scope: str
    source: str
    event_id: str


# --- Contract years (SPEC 4.2) -------------------------------------------------------------


def _add_years(start: date, years: int) -> date:
    year = start.year + years
    try:
        return start.replace(year=year)
    except ValueError:
        # 29 February in a year without one.
        return start.replace(year=year, day=28)


def year_bounds(start: date, number: int) -> tuple[datetime, datetime]:
    """Year ``number`` (from 1) as ``[begin, end)``, aware UTC datetimes at 00:00 UTC.

    Both bounds are computed from the original start, so a 29 February start gives
    28 February in years without one and 29 February again in leap years.
    """
    if isinstance(start, datetime) or not isinstance(start, date):
        raise TypeError(f"start must be a date, not {type(start).__name__}")
    if isinstance(number, bool) or not isinstance(number, int):
        raise TypeError(f"year number must be an int, not {type(number).__name__}")
    if number < 1:
        raise ValueError(f"contract years are numbered from 1, got {number}")
    begin = _add_years(start, number - 1)
    end = _add_years(start, number)
    return (
        datetime(begin.year, begin.month, begin.day, tzinfo=UTC),
        datetime(end.year, end.month, end.day, tzinfo=UTC),
    )


def year_number(start: date, years: int, instant: datetime) -> int | None:
    """The contract year (1..years) containing ``instant`` (any offset), else None."""
    _require_aware(instant, "instant")
    if isinstance(start, datetime) or not isinstance(start, date):
        raise TypeError(f"start must be a date, not {type(start).__name__}")
    if years < 1:
        return None
    utc = instant.astimezone(UTC)
    # Year k begins in calendar year start.year + k - 1, so only two candidates exist.
    for number in (utc.year - start.year, utc.year - start.year + 1):
        if 1 <= number <= years:
            begin = _add_years(start, number - 1)
            if utc.date() < begin:
                continue
            # Bounds are at 00:00 UTC, so comparing UTC dates is exact. An end past 9999
            # cannot be represented, and every representable instant lies before it.
            if start.year + number <= date.max.year and utc.date() >= _add_years(start, number):
                continue
            return number
    return None


# --- Incidents (SPEC 4.3) ------------------------------------------------------------------


def _event_key(event: EventFact) -> tuple[datetime, str, str]:
    # (time, id) as the SPEC says; source last only so that the order is total.
    return (event.time, event.id, event.source)


def detection(events: Iterable[EventFact]) -> Detection | None:
    """The earliest ``failure.detected`` by (time, id); None when there is none."""
    detected = [e for e in events if e.type == FAILURE_DETECTED]
    if not detected:
        return None
    first = min(detected, key=_event_key)
    return Detection(
        time=first.time.astimezone(UTC),
        trigger=first.data["trigger"],
        category=first.data["category"],
        scope=first.data.get("scope") or SCOPE_NODE,
        source=first.source,
        event_id=first.id,
    )


def resolution_deadline(detected_at: datetime, terms: Terms) -> datetime:
    """The last instant at which a resume still counts as live (inclusive); at most the last
    representable instant (a detection in the year 9999 has no later one)."""
    _require_aware(detected_at, "detection time")
    if detected_at > LAST_INSTANT - terms.deadline:
        return LAST_INSTANT
    return detected_at + terms.deadline


def _steps_lost(event: EventFact) -> int:
    value = event.data["steps_lost"]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"event {event.id!r}: steps_lost must be an integer, got {value!r}")
    return value


# Why an outcome was decided: one reason per clause of SPEC 4.3's table, first that applies.
NO_DETECTION = "no_detection"  # no failure.detected yet: no outcome
PLANNED_TRIGGER = "planned_trigger"
NETWORK_WIDE = "network_wide"
EXCLUDED_CATEGORY = "excluded_category"
UNSUPPORTED_FRAMEWORK = "unsupported_framework"
CHECKPOINT_RESTORE = "checkpoint_restore"
LOSSY_MIGRATION = "lossy_migration"
LIVE_RESUME = "live_resume"
LATE_RESUME = "late_resume"
RESUME_WITHOUT_MIGRATION = "resume_without_migration"
MIGRATION_FAILURE = "migration_failure"
NO_RECOVERY = "no_recovery"
WITHIN_DEADLINE = "within_deadline"


@dataclass(frozen=True)
class Decision:
    """An incident's outcome with the clause that decided it and the events that clause cites.

    ``cited`` holds, per reason: the restore or the lossy completion (rolled back); the clean
    completion and the resume (live, late resume); the last failed migration; nothing else.
    ``unsupported`` names the job's frameworks the contract does not support."""

    outcome: str | None
    reason: str
    detection: Detection | None = None
    deadline: datetime | None = None
    cited: tuple[EventFact, ...] = ()
    unsupported: tuple[str, ...] = ()


def decide(
    events: Iterable[EventFact],
    *,
    job_frameworks: Iterable[str],
    terms: Terms,
    now: datetime,
) -> Decision:
    """The incident's outcome by SPEC 4.3 (first rule that applies), with its reason.

    ``events`` are the incident's events; ``job_frameworks`` the frameworks reported by the
    ``job.started`` events of its job (none reported counts as supported). The outcome is None
    when there is no ``failure.detected`` yet. The result depends only on the set of events, not
    on their order or repetition. Manual exclusions and overrides are the caller's business.
    """
    _require_aware(now, "now")
    events = list(events)
    found = detection(events)
    if found is None:
        return Decision(None, NO_DETECTION)
    deadline = resolution_deadline(found.time, terms)

    def decided(outcome_: str, reason: str, *cited: EventFact, **extra) -> Decision:
        return Decision(outcome_, reason, found, deadline, cited, **extra)

    if found.trigger == TRIGGER_PLANNED:
        return decided(PLANNED, PLANNED_TRIGGER)
    if found.scope == SCOPE_NETWORK_WIDE:
        return decided(EXCLUDED, NETWORK_WIDE)
    if found.category in terms.excluded_categories:
        return decided(EXCLUDED, EXCLUDED_CATEGORY)
    unsupported = sorted(
        {fw for fw in job_frameworks if fw and fw not in terms.supported_frameworks}
    )
    if unsupported:
        return decided(EXCLUDED, UNSUPPORTED_FRAMEWORK, unsupported=tuple(unsupported))

    completed = sorted((e for e in events if e.type == MIGRATION_COMPLETED), key=_event_key)
    restores = sorted((e for e in events if e.type == CHECKPOINT_RESTORED), key=_event_key)
    lossy = [e for e in completed if _steps_lost(e) > 0]
    if restores:
        return decided(ROLLED_BACK, CHECKPOINT_RESTORE, restores[0])
    if lossy:
        return decided(ROLLED_BACK, LOSSY_MIGRATION, lossy[0])

    clean = [e for e in completed if _steps_lost(e) == 0]
    resumes = sorted((e for e in events if e.type == JOB_RESUMED), key=_event_key)
    in_time = [e for e in resumes if e.time <= deadline]
    if clean and in_time:
        return decided(LIVE_RESOLVED, LIVE_RESUME, clean[0], in_time[0])

    if now <= deadline:
        return decided(PENDING, WITHIN_DEADLINE)
    if clean and resumes:
        return decided(FAILED, LATE_RESUME, clean[0], resumes[0])
    if resumes:
        return decided(FAILED, RESUME_WITHOUT_MIGRATION, resumes[0])
    failures = sorted((e for e in events if e.type == MIGRATION_FAILED), key=_event_key)
    if failures:
        return decided(FAILED, MIGRATION_FAILURE, failures[-1])
    return decided(FAILED, NO_RECOVERY)


def outcome(
    events: Iterable[EventFact],
    *,
    job_frameworks: Iterable[str],
    terms: Terms,
    now: datetime,
) -> str | None:
    """The outcome alone of :func:`decide`."""
    return decide(events, job_frameworks=job_frameworks, terms=terms, now=now).outcome


def outcome_as_of(stored: str | None, deadline_at: datetime | None, now: datetime) -> str | None:
    """A stored outcome as it stands at ``now``: pending past its deadline is failed.

    Stored outcomes are decided when events arrive; time alone turns a pending incident into a
    failed one (SPEC 4.3) and the periodic expiry stores that later. Every read applies this
    rule, so what it shows never depends on whether the expiry has run yet."""
    _require_aware(now, "now")
    if stored == PENDING and deadline_at is not None and now > deadline_at:
        return FAILED
    return stored


def counts_as_of(counts: Mapping[str, int], expired_pending: int) -> dict[str, int]:
    """A year's stored outcome counts with ``expired_pending`` pending incidents, whose deadline
    has passed since the counts were stored, counted as failed (:func:`outcome_as_of`)."""
    moved = min(expired_pending, counts.get(PENDING, 0))
    result = dict(counts)
    result[PENDING] = counts.get(PENDING, 0) - moved
    result[FAILED] = counts.get(FAILED, 0) + moved
    return result


# --- Compliance (SPEC 4.4) -----------------------------------------------------------------


def eligible(counts: Mapping[str, int]) -> int:
    """live_resolved + rolled_back + failed of a year's outcome counts."""
    return sum(counts.get(outcome, 0) for outcome in ELIGIBLE)


def _check_counts(live_resolved: int, eligible: int) -> None:
    for name, value in (("live_resolved", live_resolved), ("eligible", eligible)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        if value < 0:
            raise ValueError(f"{name} must not be negative, got {value}")
    if live_resolved > eligible:
        raise ValueError(f"live_resolved ({live_resolved}) exceeds eligible ({eligible})")


def _exact(value: Decimal | int, what: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, Decimal | int):
        raise TypeError(f"{what} must be a Decimal or int, not {type(value).__name__}")
    if isinstance(value, Decimal) and not value.is_finite():
        raise ValueError(f"{what} must be a finite number, got {value}")
    return Fraction(value)


def _target(target: Decimal | int) -> Fraction:
    exact = _exact(target, "target")
    if not 0 <= exact <= 100:
        raise ValueError(f"target is a percentage between 0 and 100, got {target}")
    return exact


def _decimal(units: int, places: int) -> Decimal:
    # Built from a string: exact whatever the decimal context's precision.
    if places == 0:
        return Decimal(units)
    return Decimal(f"{units}E-{places}")


def _round_half_up(value: Fraction, places: int) -> Decimal:
    """``value`` rounded half away from zero to ``places`` decimals, exactly that many."""
    scaled = abs(value) * 10**places
    units = (2 * scaled.numerator + scaled.denominator) // (2 * scaled.denominator)
    return _decimal(-units if value < 0 else units, places)


def compliance(live_resolved: int, eligible: int) -> Decimal | None:
    """live / eligible rounded half-up to 4 places (``Decimal("0.9412")``); None if eligible 0."""
    _check_counts(live_resolved, eligible)
    if eligible == 0:
        return None
    return _round_half_up(Fraction(live_resolved, eligible), 4)


def meets(live_resolved: int, eligible: int, target: Decimal) -> bool:
    """``100 × live ≥ target × eligible``, exactly; a year with nothing eligible meets it."""
    _check_counts(live_resolved, eligible)
    return 100 * live_resolved >= _target(target) * eligible


def remaining_budget(live_resolved: int, eligible: int, target: Decimal) -> int | None:
    """How many further non-live eligible failures the year absorbs and still meets.

    The largest ``f ≥ 0`` with ``100 × live ≥ target × (eligible + f)``; 0 when the year
    already misses (or would miss with one more); None when the target is 0 (unbounded).
    """
    _check_counts(live_resolved, eligible)
    exact = _target(target)
    if exact == 0:
        return None
    most = math.floor(100 * live_resolved / exact)
    return max(0, most - eligible)


def clopper_pearson(
    successes: int, trials: int, confidence: Decimal | float = 0.95
) -> tuple[float, float] | None:
    """Exact (Clopper-Pearson) two-sided interval for a binomial rate; None if no trials."""
    for name, value in (("successes", successes), ("trials", trials)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    level = float(confidence)
    if not 0 < level < 1:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence}")
    if trials == 0:
        return None

    from scipy.stats import beta  # imported lazily: scipy is slow to import

    alpha = 1 - level
    lower = 0.0 if successes == 0 else float(beta.ppf(alpha / 2, successes, trials - successes + 1))
    upper = (
        1.0
        if successes == trials
        else float(beta.ppf(1 - alpha / 2, successes + 1, trials - successes))
    )
    return (lower, upper)


# --- Money (SPEC 4.5) ----------------------------------------------------------------------

# ISO 4217 minor units named by the SPEC; they win over the library.
_MINOR_UNITS = {
    "USD": 2,
    "EUR": 2,
    "GBP": 2,
    "CHF": 2,
    "JPY": 0,
    "KRW": 0,
    "KWD": 3,
    "BHD": 3,
    "JOD": 3,
}

# ISO 4217 codes with no minor unit ("N.A."): metals, funds, testing, "no currency".
_NOT_MONEY = frozenset(
    {"XAG", "XAU", "XBA", "XBB", "XBC", "XBD", "XDR", "XPD", "XPT", "XSU", "XTS", "XUA", "XXX"}
)

_CODE = re.compile(r"[A-Z]{3}")


@cache
def _known_currencies() -> frozenset[str]:
    from babel.numbers import list_currencies

    return frozenset(list_currencies())


def minor_units(currency: str) -> int:
    """Decimal places of the currency's minor unit; ValueError for an unknown code."""
    if not isinstance(currency, str) or not _CODE.fullmatch(currency):
        raise ValueError(f"{currency!r} is not an ISO 4217 currency code (three capitals)")
    if currency in _MINOR_UNITS:
        return _MINOR_UNITS[currency]
    if currency in _NOT_MONEY or currency not in _known_currencies():
        raise ValueError(f"unknown currency {currency!r}")
    from babel.numbers import get_currency_precision

    return get_currency_precision(currency)


def _finite(value: Decimal | int, what: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, Decimal | int):
        raise TypeError(f"{what} must be a Decimal, not {type(value).__name__}")
    value = Decimal(value)
    if not value.is_finite():
        raise ValueError(f"{what} must be a finite number, got {value}")
    return value


def check_amount(value: Decimal, currency: str) -> None:
    """Refuse (ValueError) an amount that is negative, not finite, or finer than the minor unit.

    Trailing zeros are fine: ``Decimal("1000.100")`` USD is accepted.
    """
    places = minor_units(currency)
    value = _finite(value, "amount")
    if value < 0:
        raise ValueError(f"amount must not be negative, got {value} {currency}")
    _, digits, exponent = value.as_tuple()
    extra = -exponent - places  # digits beyond the minor unit
    if extra > 0 and any(digits[-extra:]):
        unit = "whole units" if places == 0 else f"at most {places} decimal places"
        raise ValueError(
            f"{value} {currency} is not a whole number of the currency's minor unit "
            f"({currency} takes {unit})"
        )


def credit_amount(credit_rate: Decimal, base_value: Decimal, currency: str) -> Decimal:
    """``base × rate / 100`` (rate is a percentage), half-up to the currency's minor unit.

    The result carries exactly the minor unit's decimals, so ``str()`` gives
    ``"300000.00"``, ``"75000"`` or ``"1234.567"``.
    """
    places = minor_units(currency)
    rate = _finite(credit_rate, "credit rate")
    base = _finite(base_value, "base value")
    if rate < 0:
        raise ValueError(f"credit rate must not be negative, got {rate}")
    if base < 0:
        raise ValueError(f"base value must not be negative, got {base}")
    return _round_half_up(Fraction(base) * Fraction(rate) / 100, places)


def format_amount(value: Decimal, currency: str) -> str:
    """``value`` written with exactly the currency's minor-unit decimals, rounded half-up."""
    places = minor_units(currency)
    return str(_round_half_up(Fraction(_finite(value, "amount")), places))


# --- Re-deriving a closed year from its evidence -------------------------------------------


@dataclass(frozen=True)
class IncidentInputs:
    """What a year's evidence names for one incident: its events, the frameworks its job
    reported, and the account team's override in force (None: the computed outcome stands)."""

    id: int
    events: tuple[EventFact, ...]
    job_frameworks: frozenset[str] = frozenset()
    override: str | None = None


@dataclass(frozen=True)
class YearInputs:
    """Everything a closed year's result follows from. ``now`` is when it closed: a pending
    incident whose deadline had passed by then counts as failed."""

    begin: datetime
    end: datetime
    terms: Terms
    target: Decimal
    now: datetime
    incidents: tuple[IncidentInputs, ...]

    def __post_init__(self) -> None:
        for name in ("begin", "end", "now"):
            _require_aware(getattr(self, name), name)


@dataclass(frozen=True)
class YearDerivation:
    """A year re-derived: each incident's outcome (None: it counts toward no outcome of this
    year, having no detection inside it) and the counts, eligible total and verdict."""

    outcomes: Mapping[int, str | None]
    counts: Mapping[str, int]
    eligible: int
    meets: bool


def _derive_year_1(inputs: YearInputs) -> YearDerivation:
    """Rules version 1: SPEC 4.3 per incident (override first), 4.4 for the year."""
    outcomes: dict[int, str | None] = {}
    for incident in inputs.incidents:
        found = detection(incident.events)
        if found is None or not inputs.begin <= found.time < inputs.end:
            outcomes[incident.id] = None
            continue
        computed = outcome(
            incident.events,
            job_frameworks=incident.job_frameworks,
            terms=inputs.terms,
            now=inputs.now,
        )
        outcomes[incident.id] = incident.override or computed
    counts = dict.fromkeys(OUTCOMES, 0)
    for decided in outcomes.values():
        if decided is not None:
            counts[decided] += 1
    total = eligible(counts)
    return YearDerivation(
        outcomes=outcomes,
        counts=counts,
        eligible=total,
        meets=meets(counts[LIVE_RESOLVED], total, inputs.target),
    )


# Every released rules version, callable for ever: an old snapshot is re-derived with the rules
# it names. A rule change adds a version (a new function) and leaves the released ones deciding
# exactly as they did, with the helpers they call.
RELEASED_RULES: Mapping[str, Callable[[YearInputs], YearDerivation]] = {"1": _derive_year_1}


class UnknownRulesVersion(ValueError):
    """A snapshot names a rules version that was never released."""


def released(version: str) -> Callable[[YearInputs], YearDerivation]:
    """The released rules ``version``; UnknownRulesVersion for one never released."""
    derive = RELEASED_RULES.get(version) if isinstance(version, str) else None
    if derive is None:
        raise UnknownRulesVersion(
            f"rules version {version!r} was never released "
            f"(released: {', '.join(sorted(RELEASED_RULES))})"
        )
    return derive
