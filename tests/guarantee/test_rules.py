"""Unit tests of the guarantee's pure rules (SPEC 3 and 4): every rule and every boundary."""

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction

import pytest

from yoco.guarantee import rules
from yoco.guarantee.rules import (
    Detection,
    EventFact,
    Terms,
    check_amount,
    clopper_pearson,
    compliance,
    credit_amount,
    detection,
    format_amount,
    meets,
    minor_units,
    outcome,
    remaining_budget,
    resolution_deadline,
    year_bounds,
    year_number,
)
from yoco.lib import vocabulary
from yoco.lib.vocabulary import (
    CHECKPOINT_RESTORED,
    ELIGIBLE,
    FAILURE_DETECTED,
    JOB_RESUMED,
    JOB_STARTED,
    MIGRATION_COMPLETED,
    MIGRATION_FAILED,
    MIGRATION_STARTED,
    OUTCOMES,
)

IST = timezone(timedelta(hours=5, minutes=30))
PST = timezone(timedelta(hours=-8))

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SOURCE = "/clusters/c1/jobs/j1"
TERMS = Terms(
    deadline=timedelta(minutes=15),
    supported_frameworks=frozenset({"torchtitan", "megatron-lm", "deepspeed", "pytorch"}),
    excluded_categories=frozenset({"software_user", "sdc"}),
)
DEADLINE = T0 + timedelta(minutes=15)
JUST_AFTER = DEADLINE + timedelta(microseconds=1)


def ev(type_, at=T0, data=None, *, id_=None, source=SOURCE, seconds=0):
    """An event of ``type_`` (short form "failure.detected" accepted) at ``at + seconds``."""
    if not type_.startswith("io."):
        type_ = "io.yoco." + type_
    time = at + timedelta(seconds=seconds)
    if id_ is None:
        id_ = f"{type_.rsplit('.', 2)[-2]}-{type_.rsplit('.', 1)[-1]}-{time.isoformat()}"
    return EventFact(id=id_, source=source, type=type_, time=time, data=dict(data or {}))


def detected(at=T0, trigger="unplanned", category="gpu_xid", scope=None, **kw):
    data = {"trigger": trigger, "category": category}
    if scope is not None:
        data["scope"] = scope
    return ev("failure.detected", at, data, **kw)


def completed(at=T0, steps_lost=0, **kw):
    return ev("migration.completed", at, {"steps_lost": steps_lost, "duration_ms": 1000}, **kw)


def resumed(at=T0, **kw):
    return ev("job.resumed", at, {"step": 100, "downtime_ms": 1000}, **kw)


def restored(at=T0, steps_lost=10, **kw):
    return ev("checkpoint.restored", at, {"steps_lost": steps_lost, "checkpoint_step": 90}, **kw)


def mig_failed(at=T0, **kw):
    return ev("migration.failed", at, {"reason": "no spare"}, **kw)


def mig_started(at=T0, **kw):
    return ev("migration.started", at, {"mode": "model_aware", "state_source": "replica"}, **kw)


def decide(events, *, now=T0, frameworks=(), terms=TERMS):
    return outcome(events, job_frameworks=frameworks, terms=terms, now=now)


def live(at=T0):
    """The events of a textbook live recovery starting at ``at``."""
    return [
        detected(at),
        mig_started(at, seconds=1),
        completed(at, seconds=60),
        resumed(at, seconds=61),
    ]


# --- constants ------------------------------------------------------------------------------


class TestConstants:
    def test_rules_version_is_a_string(self):
        assert rules.RULES_VERSION == "1"

    def test_outcomes_and_eligible(self):
        assert OUTCOMES == (
            "live_resolved",
            "rolled_back",
            "failed",
            "pending",
            "excluded",
            "planned",
        )
        assert ELIGIBLE == ("live_resolved", "rolled_back", "failed")
        assert set(ELIGIBLE) <= set(OUTCOMES)

    def test_event_types(self):
        assert vocabulary.EVENT_TYPE_PREFIX == "io.yoco."
        assert vocabulary.EVENT_TYPES == (
            "io.yoco.job.started",
            "io.yoco.job.finished",
            "io.yoco.failure.detected",
            "io.yoco.migration.started",
            "io.yoco.migration.completed",
            "io.yoco.migration.failed",
            "io.yoco.checkpoint.restored",
            "io.yoco.job.resumed",
        )
        assert FAILURE_DETECTED == "io.yoco.failure.detected"
        assert JOB_STARTED == "io.yoco.job.started"
        assert vocabulary.JOB_FINISHED == "io.yoco.job.finished"
        assert MIGRATION_STARTED == "io.yoco.migration.started"
        assert MIGRATION_COMPLETED == "io.yoco.migration.completed"
        assert MIGRATION_FAILED == "io.yoco.migration.failed"
        assert CHECKPOINT_RESTORED == "io.yoco.checkpoint.restored"
        assert JOB_RESUMED == "io.yoco.job.resumed"
        assert all(t.startswith(vocabulary.EVENT_TYPE_PREFIX) for t in vocabulary.EVENT_TYPES)

    def test_incident_types_need_a_subject(self):
        assert set(vocabulary.INCIDENT_EVENT_TYPES) == set(vocabulary.EVENT_TYPES) - {
            JOB_STARTED,
            vocabulary.JOB_FINISHED,
        }

    def test_enumerations(self):
        assert vocabulary.TRIGGERS == ("unplanned", "preemptive", "planned")
        assert vocabulary.SCOPES == ("node", "network_wide")
        assert len(vocabulary.CATEGORIES) == 17 == len(set(vocabulary.CATEGORIES))
        assert {"sdc", "software_user", "maintenance", "fail_slow", "unknown"} <= set(
            vocabulary.CATEGORIES
        )
        assert vocabulary.SPARES == ("standby", "reclaimed")
        assert vocabulary.FRAMEWORKS == ("torchtitan", "megatron-lm", "deepspeed", "pytorch")

    def test_contract_defaults(self):
        assert rules.DEFAULT_SUPPORTED_FRAMEWORKS == frozenset(vocabulary.FRAMEWORKS)
        assert rules.DEFAULT_EXCLUDED_CATEGORIES == frozenset({"software_user", "sdc"})
        assert rules.DEFAULT_DEADLINE == timedelta(minutes=15)
        assert rules.DEFAULT_TARGET == Decimal("90")
        assert rules.DEFAULT_CREDIT_RATE == Decimal("25")
        assert Terms() == TERMS


class TestDataclasses:
    def test_event_fact_is_frozen(self):
        event = detected()
        with pytest.raises(AttributeError):
            event.id = "x"

    def test_event_fact_refuses_naive_time(self):
        with pytest.raises(ValueError, match="timezone-aware"):
            EventFact(id="a", source=SOURCE, type=FAILURE_DETECTED, time=datetime(2025, 1, 1))

    def test_terms_coerces_collections(self):
        terms = Terms(timedelta(minutes=5), ["pytorch"], {"sdc"})
        assert terms.supported_frameworks == frozenset({"pytorch"})
        assert terms.excluded_categories == frozenset({"sdc"})
        assert isinstance(terms.supported_frameworks, frozenset)
        assert hash(terms) == hash(Terms(timedelta(minutes=5), ("pytorch",), ("sdc",)))

    def test_terms_refuses_string_collections(self):
        with pytest.raises(TypeError):
            Terms(timedelta(minutes=5), "pytorch", frozenset())

    def test_terms_refuses_negative_deadline(self):
        with pytest.raises(ValueError):
            Terms(deadline=timedelta(seconds=-1))

    def test_terms_refuses_non_timedelta(self):
        with pytest.raises(TypeError):
            Terms(deadline=15)


# --- contract years (SPEC 4.2) --------------------------------------------------------------


def utc(y, m, d):
    return datetime(y, m, d, tzinfo=UTC)


class TestYearBounds:
    @pytest.mark.parametrize(
        ("number", "begin", "end"),
        [
            (1, utc(2025, 3, 15), utc(2026, 3, 15)),
            (2, utc(2026, 3, 15), utc(2027, 3, 15)),
            (3, utc(2027, 3, 15), utc(2028, 3, 15)),
            (4, utc(2028, 3, 15), utc(2029, 3, 15)),
            (5, utc(2029, 3, 15), utc(2030, 3, 15)),
        ],
    )
    def test_ordinary_start(self, number, begin, end):
        assert year_bounds(date(2025, 3, 15), number) == (begin, end)

    @pytest.mark.parametrize(
        ("number", "begin", "end"),
        [
            (1, utc(2024, 2, 29), utc(2025, 2, 28)),
            (2, utc(2025, 2, 28), utc(2026, 2, 28)),
            (3, utc(2026, 2, 28), utc(2027, 2, 28)),
            (4, utc(2027, 2, 28), utc(2028, 2, 29)),  # back to 29 Feb: not cumulative
            (5, utc(2028, 2, 29), utc(2029, 2, 28)),
        ],
    )
    def test_29_february_start(self, number, begin, end):
        assert year_bounds(date(2024, 2, 29), number) == (begin, end)

    def test_29_february_start_across_a_century_non_leap_year(self):
        # 2100 is not a leap year; 2096 and 2104 are.
        assert year_bounds(date(2096, 2, 29), 4) == (utc(2099, 2, 28), utc(2100, 2, 28))
        assert year_bounds(date(2096, 2, 29), 5) == (utc(2100, 2, 28), utc(2101, 2, 28))
        assert year_bounds(date(2096, 2, 29), 8) == (utc(2103, 2, 28), utc(2104, 2, 29))

    def test_28_february_start_stays_on_28(self):
        assert year_bounds(date(2023, 2, 28), 2) == (utc(2024, 2, 28), utc(2025, 2, 28))

    def test_1_march_start_in_leap_year(self):
        assert year_bounds(date(2024, 3, 1), 1) == (utc(2024, 3, 1), utc(2025, 3, 1))

    def test_1_january_start(self):
        assert year_bounds(date(2025, 1, 1), 1) == (utc(2025, 1, 1), utc(2026, 1, 1))

    def test_bounds_are_aware_utc_midnight(self):
        begin, end = year_bounds(date(2025, 7, 4), 3)
        for bound in (begin, end):
            assert bound.tzinfo is UTC
            assert (bound.hour, bound.minute, bound.second, bound.microsecond) == (0, 0, 0, 0)

    def test_consecutive_years_tile(self):
        start = date(2024, 2, 29)
        for k in range(1, 12):
            assert year_bounds(start, k)[1] == year_bounds(start, k + 1)[0]

    @pytest.mark.parametrize("number", [0, -1])
    def test_number_below_one_is_refused(self, number):
        with pytest.raises(ValueError):
            year_bounds(date(2025, 1, 1), number)

    def test_datetime_start_is_refused(self):
        with pytest.raises(TypeError):
            year_bounds(datetime(2025, 1, 1, tzinfo=UTC), 1)

    def test_non_int_number_is_refused(self):
        with pytest.raises(TypeError):
            year_bounds(date(2025, 1, 1), 1.0)


class TestYearNumber:
    START = date(2025, 3, 15)

    @pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
    def test_exact_bounds(self, k):
        begin, end = year_bounds(self.START, k)
        assert year_number(self.START, 5, begin) == k
        assert year_number(self.START, 5, end - timedelta(microseconds=1)) == k
        assert year_number(self.START, 5, end) == (k + 1 if k < 5 else None)

    def test_before_start_and_after_term(self):
        assert year_number(self.START, 3, utc(2025, 3, 15) - timedelta(microseconds=1)) is None
        assert year_number(self.START, 3, utc(2028, 3, 15)) is None
        assert year_number(self.START, 3, utc(2028, 3, 15) - timedelta(microseconds=1)) == 3
        assert year_number(self.START, 3, utc(1990, 1, 1)) is None
        assert year_number(self.START, 3, utc(2100, 1, 1)) is None

    def test_plus_0530_offset_at_the_bound(self):
        # 05:30 at +05:30 is exactly the UTC midnight that starts year 2.
        at = datetime(2026, 3, 15, 5, 30, tzinfo=IST)
        assert year_number(self.START, 3, at) == 2
        assert year_number(self.START, 3, at - timedelta(microseconds=1)) == 1
        # Local date already 15 March, but UTC still 14 March: year 1.
        assert year_number(self.START, 3, datetime(2026, 3, 15, 5, 29, 59, tzinfo=IST)) == 1
        # 00:00 local on the anniversary is the previous UTC day.
        assert year_number(self.START, 3, datetime(2026, 3, 15, 0, 0, tzinfo=IST)) == 1

    def test_minus_0800_offset_at_the_bound(self):
        # 16:00 on 14 March at -08:00 is 00:00 UTC on 15 March.
        at = datetime(2026, 3, 14, 16, 0, tzinfo=PST)
        assert year_number(self.START, 3, at) == 2
        assert year_number(self.START, 3, at - timedelta(microseconds=1)) == 1
        # Local date is still before the start, but UTC is past it: year 1.
        assert year_number(self.START, 3, datetime(2025, 3, 14, 16, 0, tzinfo=PST)) == 1
        assert year_number(self.START, 3, datetime(2025, 3, 14, 15, 59, 59, tzinfo=PST)) is None
        # End of the term, seen from -08:00.
        assert year_number(self.START, 3, datetime(2028, 3, 14, 15, 59, 59, tzinfo=PST)) == 3
        assert year_number(self.START, 3, datetime(2028, 3, 14, 16, 0, tzinfo=PST)) is None

    def test_29_february_start_in_leap_and_non_leap_years(self):
        start = date(2024, 2, 29)
        assert year_number(start, 5, utc(2024, 2, 29)) == 1
        assert year_number(start, 5, utc(2024, 2, 28)) is None
        assert year_number(start, 5, datetime(2025, 2, 27, 23, 59, 59, tzinfo=UTC)) == 1
        assert year_number(start, 5, utc(2025, 2, 28)) == 2
        assert year_number(start, 5, utc(2025, 3, 1)) == 2
        assert year_number(start, 5, utc(2028, 2, 28)) == 4  # leap year: year 5 starts 29 Feb
        assert year_number(start, 5, utc(2028, 2, 29)) == 5
        assert year_number(start, 5, utc(2029, 2, 27)) == 5
        assert year_number(start, 5, utc(2029, 2, 28)) is None
        # 29 Feb 2028 begins at 05:30 local in India.
        assert year_number(start, 5, datetime(2028, 2, 29, 5, 29, tzinfo=IST)) == 4
        assert year_number(start, 5, datetime(2028, 2, 29, 5, 30, tzinfo=IST)) == 5
        # ... and at 16:00 the day before on the US west coast.
        assert year_number(start, 5, datetime(2028, 2, 28, 16, 0, tzinfo=PST)) == 5
        assert year_number(start, 5, datetime(2028, 2, 28, 15, 59, tzinfo=PST)) == 4

    def test_zero_years_contains_nothing(self):
        assert year_number(self.START, 0, utc(2025, 6, 1)) is None

    def test_naive_instant_is_refused(self):
        with pytest.raises(ValueError, match="timezone-aware"):
            year_number(self.START, 3, datetime(2025, 6, 1))

    def test_last_representable_years(self):
        assert year_number(date(9998, 1, 1), 5, utc(9999, 12, 31)) == 2
        assert year_number(date(1, 1, 1), 1, utc(1, 6, 1)) == 1


# --- detection ------------------------------------------------------------------------------


class TestDetection:
    def test_none_without_failure_detected(self):
        assert detection([]) is None
        assert detection([completed(), resumed()]) is None

    def test_fields(self):
        found = detection([detected(trigger="preemptive", category="gpu_ecc", id_="d1")])
        assert found == Detection(
            time=T0,
            trigger="preemptive",
            category="gpu_ecc",
            scope="node",
            source=SOURCE,
            event_id="d1",
        )

    def test_scope_explicit(self):
        assert detection([detected(scope="network_wide")]).scope == "network_wide"
        assert detection([detected(scope="node")]).scope == "node"

    def test_earliest_by_time(self):
        early = detected(T0, category="gpu_ecc", id_="z")
        late = detected(T0 + timedelta(seconds=1), category="power", id_="a")
        assert detection([late, early]).event_id == "z"
        assert detection([early, late]).category == "gpu_ecc"

    def test_tie_on_time_broken_by_id(self):
        a = detected(category="gpu_ecc", id_="a")
        b = detected(category="power", id_="b")
        assert detection([b, a]).event_id == "a"
        assert detection([a, b]).event_id == "a"

    def test_time_compared_across_offsets_and_returned_in_utc(self):
        # 17:29 at +05:30 is 11:59 UTC: earlier than 12:00 UTC.
        at = datetime(2025, 3, 1, 17, 29, tzinfo=IST)
        local = EventFact(
            "x", SOURCE, FAILURE_DETECTED, at, {"trigger": "unplanned", "category": "power"}
        )
        found = detection([detected(T0, id_="a"), local])
        assert found.event_id == "x"
        assert found.time == datetime(2025, 3, 1, 11, 59, tzinfo=UTC)
        assert found.time.utcoffset() == timedelta(0)

    def test_other_types_ignored(self):
        found = detection([completed(T0 - timedelta(hours=1)), detected(T0, id_="d")])
        assert found.event_id == "d"

    def test_generator_input(self):
        assert detection(e for e in [detected(id_="g")]).event_id == "g"


def test_resolution_deadline():
    assert resolution_deadline(T0, TERMS) == T0 + timedelta(minutes=15)
    # A detection in the last minutes of the year 9999 has no later instant: the last one.
    last = datetime(9999, 12, 31, 23, 50, tzinfo=UTC)
    assert resolution_deadline(last, TERMS) == rules.LAST_INSTANT
    edge = rules.LAST_INSTANT - timedelta(minutes=15)
    assert resolution_deadline(edge, TERMS) == rules.LAST_INSTANT
    assert resolution_deadline(T0, Terms(deadline=timedelta(0))) == T0
    with pytest.raises(ValueError):
        resolution_deadline(datetime(2025, 1, 1), TERMS)


# --- outcome (SPEC 4.3) ---------------------------------------------------------------------


class TestOutcomeRows:
    def test_none_without_failure_detected(self):
        assert decide([]) is None
        assert decide([completed(), resumed()], now=T0 + timedelta(days=3)) is None
        assert decide([restored()]) is None

    def test_pending_right_after_detection(self):
        assert decide([detected()], now=T0) == "pending"

    def test_pending_exactly_at_the_deadline(self):
        assert decide([detected()], now=DEADLINE) == "pending"

    def test_failed_just_after_the_deadline(self):
        assert decide([detected()], now=JUST_AFTER) == "failed"

    def test_live_resolved(self):
        assert decide(live(), now=T0 + timedelta(minutes=2)) == "live_resolved"
        assert decide(live(), now=T0 + timedelta(days=30)) == "live_resolved"

    def test_live_resolved_needs_no_migration_started(self):
        assert decide([detected(), completed(seconds=5), resumed(seconds=6)]) == "live_resolved"

    def test_resume_exactly_at_the_deadline_is_live(self):
        events = [detected(), completed(seconds=60), resumed(DEADLINE)]
        assert decide(events, now=DEADLINE + timedelta(hours=1)) == "live_resolved"

    def test_resume_a_microsecond_late_is_failed(self):
        events = [detected(), completed(seconds=60), resumed(JUST_AFTER)]
        assert decide(events, now=JUST_AFTER) == "failed"
        assert decide(events, now=JUST_AFTER + timedelta(days=1)) == "failed"

    def test_late_resume_is_pending_while_now_is_within_the_deadline(self):
        # Times are not checked against the clock: "now" may precede an event's time.
        events = [detected(), completed(seconds=60), resumed(JUST_AFTER)]
        assert decide(events, now=DEADLINE) == "pending"

    def test_resume_at_deadline_with_non_utc_offset(self):
        at = DEADLINE.astimezone(PST)
        events = [detected(), completed(seconds=60), resumed(at)]
        assert decide(events, now=JUST_AFTER) == "live_resolved"
        at = JUST_AFTER.astimezone(IST)
        events = [detected(), completed(seconds=60), resumed(at)]
        assert decide(events, now=JUST_AFTER) == "failed"

    def test_completed_migration_late_but_resume_in_time_is_live(self):
        # Only the resume is held to the deadline.
        events = [detected(), completed(DEADLINE + timedelta(minutes=5)), resumed(DEADLINE)]
        assert decide(events, now=JUST_AFTER) == "live_resolved"

    def test_one_of_several_resumes_in_time_is_enough(self):
        events = [
            detected(),
            completed(seconds=30),
            resumed(JUST_AFTER, id_="late"),
            resumed(seconds=40, id_="early"),
        ]
        assert decide(events, now=JUST_AFTER) == "live_resolved"

    def test_resume_without_completed_migration_is_failed(self):
        events = [detected(), resumed(seconds=30)]
        assert decide(events, now=DEADLINE) == "pending"
        assert decide(events, now=JUST_AFTER) == "failed"

    def test_completed_migration_without_resume(self):
        events = [detected(), completed(seconds=30)]
        assert decide(events, now=DEADLINE) == "pending"
        assert decide(events, now=JUST_AFTER) == "failed"

    def test_migration_failed_then_nothing(self):
        events = [detected(), mig_started(seconds=1), mig_failed(seconds=20)]
        assert decide(events, now=T0 + timedelta(minutes=1)) == "pending"
        assert decide(events, now=JUST_AFTER) == "failed"

    def test_migration_failed_then_a_successful_retry(self):
        events = [
            detected(),
            mig_failed(seconds=20),
            completed(seconds=90),
            resumed(seconds=91),
        ]
        assert decide(events, now=JUST_AFTER) == "live_resolved"

    def test_migration_failed_then_checkpoint_restore(self):
        events = [detected(), mig_failed(seconds=20), restored(seconds=300)]
        assert decide(events, now=T0) == "rolled_back"

    def test_checkpoint_restored(self):
        assert decide([detected(), restored(seconds=60)]) == "rolled_back"

    def test_checkpoint_restored_with_zero_steps_lost_is_still_rolled_back(self):
        assert decide([detected(), restored(seconds=60, steps_lost=0)]) == "rolled_back"

    def test_checkpoint_restored_beats_live(self):
        events = live() + [restored(seconds=120)]
        assert decide(events, now=JUST_AFTER) == "rolled_back"

    def test_rolled_back_is_final_before_the_deadline(self):
        assert decide([detected(), restored(seconds=1)], now=T0) == "rolled_back"

    def test_rolled_back_after_the_deadline(self):
        events = [detected(), restored(T0 + timedelta(hours=2))]
        assert decide(events, now=T0 + timedelta(hours=3)) == "rolled_back"

    def test_steps_lost_migration_is_rolled_back_even_with_a_resume(self):
        events = [detected(), completed(seconds=60, steps_lost=3), resumed(seconds=61)]
        assert decide(events, now=T0 + timedelta(minutes=2)) == "rolled_back"

    def test_any_lossy_migration_among_lossless_ones_is_rolled_back(self):
        events = [
            detected(),
            completed(seconds=60, steps_lost=0, id_="m1"),
            completed(seconds=90, steps_lost=1, id_="m2"),
            resumed(seconds=91),
        ]
        assert decide(events) == "rolled_back"

    def test_rollback_events_before_detection_still_count(self):
        events = [restored(T0 - timedelta(seconds=5)), detected()]
        assert decide(events) == "rolled_back"

    def test_recompute_is_not_a_rollback(self):
        done = ev(
            "migration.completed",
            T0,
            {"steps_lost": 0, "duration_ms": 1, "recompute_ms": 5000},
            seconds=30,
        )
        assert decide([detected(), done, resumed(seconds=31)]) == "live_resolved"

    def test_zero_deadline(self):
        terms = Terms(deadline=timedelta(0))
        assert decide([detected(), completed(), resumed(T0)], terms=terms) == "live_resolved"
        events = [detected(), completed(), resumed(seconds=1)]
        assert decide(events, terms=terms, now=T0) == "pending"
        assert decide(events, terms=terms, now=T0 + timedelta(microseconds=1)) == "failed"

    def test_longer_deadline(self):
        terms = Terms(deadline=timedelta(hours=1))
        events = [detected(), completed(seconds=60), resumed(T0 + timedelta(minutes=59))]
        assert decide(events, terms=terms, now=T0 + timedelta(hours=2)) == "live_resolved"

    def test_deadline_runs_from_the_earliest_detection(self):
        events = [
            detected(T0, id_="first"),
            detected(T0 + timedelta(minutes=10), id_="second"),
            completed(seconds=60),
            resumed(T0 + timedelta(minutes=20)),
        ]
        assert decide(events, now=T0 + timedelta(hours=1)) == "failed"

    def test_now_in_another_offset(self):
        assert decide([detected()], now=JUST_AFTER.astimezone(IST)) == "failed"
        assert decide([detected()], now=DEADLINE.astimezone(PST)) == "pending"

    def test_naive_now_is_refused(self):
        with pytest.raises(ValueError):
            decide([detected()], now=datetime(2025, 3, 1, 12))

    def test_preemptive_is_an_ordinary_failure(self):
        assert decide([detected(trigger="preemptive")], now=JUST_AFTER) == "failed"
        events = [detected(trigger="preemptive"), completed(), resumed(seconds=5)]
        assert decide(events) == "live_resolved"


class TestPlannedAndExcluded:
    def test_planned(self):
        assert decide([detected(trigger="planned", category="maintenance")]) == "planned"

    def test_planned_whatever_happened(self):
        events = [detected(trigger="planned"), restored(seconds=10)]
        assert decide(events, now=JUST_AFTER) == "planned"
        assert decide(live()[1:] + [detected(trigger="planned")]) == "planned"

    def test_planned_beats_excluded(self):
        assert decide([detected(trigger="planned", scope="network_wide")]) == "planned"
        assert decide([detected(trigger="planned", category="sdc")]) == "planned"
        assert decide([detected(trigger="planned")], frameworks=["jax"]) == "planned"

    def test_planned_only_by_the_earliest_detection(self):
        events = [
            detected(T0, trigger="unplanned", id_="a"),
            detected(T0 + timedelta(seconds=1), trigger="planned", id_="b"),
        ]
        assert decide(events, now=JUST_AFTER) == "failed"
        events = [
            detected(T0, trigger="planned", id_="b"),
            detected(T0, trigger="unplanned", id_="c"),
        ]
        assert decide(events, now=JUST_AFTER) == "planned"

    def test_network_wide_scope(self):
        assert decide([detected(scope="network_wide")], now=JUST_AFTER) == "excluded"

    def test_node_scope_not_excluded(self):
        assert decide([detected(scope="node")], now=JUST_AFTER) == "failed"

    @pytest.mark.parametrize("category", ["software_user", "sdc"])
    def test_default_excluded_categories(self, category):
        assert decide([detected(category=category)], now=JUST_AFTER) == "excluded"

    @pytest.mark.parametrize(
        "category", [c for c in vocabulary.CATEGORIES if c not in ("software_user", "sdc")]
    )
    def test_other_categories_count(self, category):
        assert decide([detected(category=category)], now=JUST_AFTER) == "failed"

    def test_contract_specific_exclusions(self):
        terms = Terms(excluded_categories=frozenset({"power"}))
        assert decide([detected(category="power")], terms=terms) == "excluded"
        assert decide([detected(category="sdc")], terms=terms, now=JUST_AFTER) == "failed"
        nothing = Terms(excluded_categories=frozenset())
        assert decide([detected(category="sdc")], terms=nothing, now=JUST_AFTER) == "failed"

    def test_excluded_beats_rolled_back(self):
        events = [detected(category="sdc"), restored(seconds=10)]
        assert decide(events) == "excluded"
        events = [detected(scope="network_wide"), completed(steps_lost=5), resumed(seconds=1)]
        assert decide(events) == "excluded"

    def test_excluded_beats_live_and_failed(self):
        events = [detected(category="software_user")] + live()[1:]
        assert decide(events) == "excluded"
        assert decide([detected(category="sdc")], now=T0 + timedelta(days=1)) == "excluded"

    def test_excluded_only_by_the_earliest_detection(self):
        events = [
            detected(T0, category="gpu_xid", id_="a"),
            detected(T0 + timedelta(seconds=1), category="sdc", scope="network_wide", id_="b"),
        ]
        assert decide(events, now=JUST_AFTER) == "failed"

    def test_unsupported_framework(self):
        assert decide([detected()], frameworks=["jax"]) == "excluded"

    def test_unsupported_framework_among_supported_ones(self):
        assert decide([detected()], frameworks=["pytorch", "jax"]) == "excluded"

    def test_supported_frameworks(self):
        for fw in vocabulary.FRAMEWORKS:
            assert decide(live(), frameworks=[fw]) == "live_resolved"
        assert decide(live(), frameworks=["pytorch", "deepspeed"]) == "live_resolved"

    def test_framework_support_follows_the_contract(self):
        terms = Terms(supported_frameworks=frozenset({"megatron-lm"}))
        assert decide(live(), frameworks=["pytorch"], terms=terms) == "excluded"
        assert decide(live(), frameworks=["megatron-lm"], terms=terms) == "live_resolved"
        assert decide(live(), frameworks=["megatron-lm"] * 3, terms=terms) == "live_resolved"

    def test_framework_names_are_case_sensitive(self):
        assert decide([detected()], frameworks=["PyTorch"]) == "excluded"

    def test_job_that_never_reported_a_framework_counts_as_supported(self):
        assert decide(live(), frameworks=[]) == "live_resolved"
        assert decide([detected()], frameworks=(), now=JUST_AFTER) == "failed"
        assert decide(live(), frameworks=iter(())) == "live_resolved"

    def test_no_supported_framework_at_all(self):
        terms = Terms(supported_frameworks=frozenset())
        assert decide(live(), terms=terms, frameworks=[]) == "live_resolved"
        assert decide(live(), terms=terms, frameworks=["pytorch"]) == "excluded"

    def test_frameworks_as_generator(self):
        assert decide([detected()], frameworks=(f for f in ["jax"])) == "excluded"


class TestOutcomeRobustness:
    def test_order_does_not_matter(self):
        events = [detected(), completed(seconds=30, steps_lost=2), resumed(seconds=31)]
        assert decide(events) == decide(list(reversed(events))) == "rolled_back"

    def test_duplicates_do_not_matter(self):
        events = live()
        assert decide(events + events) == decide(events) == "live_resolved"

    def test_generator_input(self):
        assert decide(e for e in live()) == "live_resolved"

    def test_unrelated_types_are_ignored(self):
        started = ev("job.started", T0 - timedelta(hours=1), {"framework": "jax", "world_size": 8})
        finished = ev("job.finished", T0 + timedelta(hours=9), {"status": "completed"})
        assert decide(live() + [started, finished]) == "live_resolved"

    def test_non_integer_steps_lost_is_refused(self):
        bad = ev("migration.completed", T0, {"steps_lost": "0", "duration_ms": 1})
        with pytest.raises(ValueError, match="steps_lost"):
            decide([detected(), bad, resumed()])
        bad = ev("migration.completed", T0, {"steps_lost": False, "duration_ms": 1})
        with pytest.raises(ValueError, match="steps_lost"):
            decide([detected(), bad, resumed()])


# --- compliance (SPEC 4.4) ------------------------------------------------------------------


class TestCompliance:
    @pytest.mark.parametrize(
        ("live_", "eligible", "expected"),
        [
            (16, 17, "0.9412"),
            (2, 3, "0.6667"),
            (1, 3, "0.3333"),
            (1, 8, "0.1250"),
            (1, 1, "1.0000"),
            (0, 1, "0.0000"),
            (9, 10, "0.9000"),
            (1, 16, "0.0625"),
            (1, 32, "0.0313"),  # 0.03125: half-up, not half-even
            (3, 32, "0.0938"),  # 0.09375
            (5, 32, "0.1563"),  # 0.15625
            (1, 160, "0.0063"),  # 0.00625
            (1, 20000, "0.0001"),  # 0.00005 rounds up
            (1, 20001, "0.0000"),  # just under half
            (19999, 20000, "1.0000"),  # 0.99995 rounds up to 1
            (19998, 20000, "0.9999"),
        ],
    )
    def test_values(self, live_, eligible, expected):
        value = compliance(live_, eligible)
        assert isinstance(value, Decimal)
        assert str(value) == expected

    def test_none_when_nothing_eligible(self):
        assert compliance(0, 0) is None

    def test_large_counts_are_exact(self):
        # 0.xxxx4999... with many nines must not round up through a 28-digit intermediate.
        eligible = 10**40
        live_ = 5 * 10**35 - 1  # 0.00004999... -> 0.0000
        assert str(compliance(live_, eligible)) == "0.0000"
        assert str(compliance(live_ + 1, eligible)) == "0.0001"

    @pytest.mark.parametrize(("live_", "eligible"), [(-1, 0), (0, -1), (3, 2)])
    def test_bad_counts(self, live_, eligible):
        with pytest.raises(ValueError):
            compliance(live_, eligible)

    def test_non_int_counts(self):
        with pytest.raises(TypeError):
            compliance(1.0, 2)
        with pytest.raises(TypeError):
            compliance(True, 2)


class TestMeets:
    NINETY = Decimal("90")

    def test_exactly_ninety_percent_meets(self):
        assert meets(9, 10, self.NINETY)
        assert meets(90, 100, self.NINETY)
        assert meets(18, 20, self.NINETY)

    def test_just_under_ninety_percent_misses(self):
        assert not meets(8, 10, self.NINETY)
        assert not meets(89, 100, self.NINETY)
        assert not meets(899, 1000, self.NINETY)
        assert not meets(8999999, 10**7, self.NINETY)

    def test_rounded_compliance_would_lie_but_meets_does_not(self):
        # 0.89996 displays as 0.9000 but misses a 90 % target.
        assert str(compliance(89996, 100000)) == "0.9000"
        assert not meets(89996, 100000, self.NINETY)

    def test_16_of_17(self):
        assert meets(16, 17, self.NINETY)
        assert not meets(16, 17, Decimal("95"))

    def test_nothing_eligible_meets(self):
        assert meets(0, 0, self.NINETY)
        assert meets(0, 0, Decimal("100"))

    def test_zero_live(self):
        assert not meets(0, 1, self.NINETY)
        assert meets(0, 5, Decimal("0"))

    def test_fractional_targets(self):
        assert meets(2, 3, Decimal("66.66"))
        assert not meets(2, 3, Decimal("66.67"))
        # 2/3 = 66.666...%; a target with many digits stays exact.
        assert meets(2, 3, Decimal("66.666666666666666666666666666666666"))
        assert not meets(2, 3, Decimal("66.666666666666666666666666666666667"))

    def test_hundred_percent_target(self):
        assert meets(5, 5, Decimal("100"))
        assert not meets(4, 5, Decimal("100"))

    def test_int_target(self):
        assert meets(9, 10, 90)

    @pytest.mark.parametrize("target", [Decimal("-1"), Decimal("100.01"), Decimal("NaN")])
    def test_bad_target(self, target):
        with pytest.raises(ValueError):
            meets(1, 1, target)

    def test_float_target_is_refused(self):
        with pytest.raises(TypeError):
            meets(1, 1, 90.0)


class TestRemainingBudget:
    NINETY = Decimal("90")

    @pytest.mark.parametrize(
        ("live_", "eligible", "expected"),
        [
            (0, 0, 0),  # one failure would be 0 %
            (9, 9, 1),  # 9/10 meets, 9/11 does not
            (9, 10, 0),  # exactly at target, no room
            (8, 10, 0),  # already misses
            (18, 18, 2),
            (90, 90, 10),
            (90, 95, 5),
            (16, 17, 0),  # 16/18 = 88.9 %
            (100, 100, 11),  # 100/111 = 90.09 %, 100/112 = 89.3 %
            (0, 5, 0),
        ],
    )
    def test_values(self, live_, eligible, expected):
        assert remaining_budget(live_, eligible, self.NINETY) == expected

    def test_zero_target_is_unbounded(self):
        assert remaining_budget(0, 10, Decimal("0")) is None
        assert remaining_budget(0, 0, Decimal("0.0")) is None

    def test_hundred_percent_target(self):
        assert remaining_budget(5, 5, Decimal("100")) == 0
        assert remaining_budget(4, 5, Decimal("100")) == 0

    def test_budget_is_the_largest_that_still_meets(self):
        for live_ in range(0, 40):
            for eligible in range(live_, 45):
                for target in (Decimal("50"), Decimal("90"), Decimal("95.5"), Decimal("99")):
                    f = remaining_budget(live_, eligible, target)
                    if meets(live_, eligible, target):
                        assert meets(live_, eligible + f, target)
                    else:
                        assert f == 0
                    assert not meets(live_, eligible + f + 1, target) or (
                        f == 0 and not meets(live_, eligible, target)
                    )

    def test_bad_inputs(self):
        with pytest.raises(ValueError):
            remaining_budget(3, 2, self.NINETY)
        with pytest.raises(ValueError):
            remaining_budget(1, 2, Decimal("101"))


class TestClopperPearson:
    def test_none_without_trials(self):
        assert clopper_pearson(0, 0) is None

    def test_known_values(self):
        # R: binom.test(5, 10)$conf.int -> 0.1870860 0.8129140
        low, high = clopper_pearson(5, 10)
        assert low == pytest.approx(0.1870860, abs=1e-6)
        assert high == pytest.approx(0.8129140, abs=1e-6)

    @pytest.mark.parametrize(("s", "n"), [(16, 17), (1, 3), (45, 50), (7, 1000)])
    def test_defining_tail_probabilities(self, s, n):
        from scipy.stats import binom

        low, high = clopper_pearson(s, n)
        # P(X >= s | p = low) = P(X <= s | p = high) = alpha / 2
        assert binom.sf(s - 1, n, low) == pytest.approx(0.025, rel=1e-6)
        assert binom.cdf(s, n, high) == pytest.approx(0.025, rel=1e-6)
        assert low < s / n < high

    def test_no_successes(self):
        low, high = clopper_pearson(0, 10)
        assert low == 0
        assert high == pytest.approx(1 - 0.025 ** (1 / 10), rel=1e-9)

    def test_all_successes(self):
        low, high = clopper_pearson(10, 10)
        assert high == 1
        assert low == pytest.approx(0.025 ** (1 / 10), rel=1e-9)

    def test_one_trial(self):
        assert clopper_pearson(1, 1) == (pytest.approx(0.025), 1.0)
        assert clopper_pearson(0, 1) == (0.0, pytest.approx(0.975))

    def test_confidence_as_decimal_and_width(self):
        narrow = clopper_pearson(45, 50, Decimal("0.80"))
        wide = clopper_pearson(45, 50, 0.99)
        assert wide[0] < narrow[0] < 0.9 < narrow[1] < wide[1]
        assert clopper_pearson(45, 50, Decimal("0.95")) == clopper_pearson(45, 50)

    def test_returns_floats(self):
        low, high = clopper_pearson(3, 7)
        assert type(low) is float and type(high) is float
        assert 0 < low < 3 / 7 < high < 1

    @pytest.mark.parametrize(("s", "n"), [(-1, 3), (4, 3), (0, -1)])
    def test_bad_counts(self, s, n):
        with pytest.raises(ValueError):
            clopper_pearson(s, n)

    @pytest.mark.parametrize("confidence", [0, 1, 1.5, -0.1, Decimal("1")])
    def test_bad_confidence(self, confidence):
        with pytest.raises(ValueError):
            clopper_pearson(1, 2, confidence)


# --- money (SPEC 4.5) -----------------------------------------------------------------------


class TestMinorUnits:
    @pytest.mark.parametrize(
        ("code", "digits"),
        [
            ("USD", 2),
            ("EUR", 2),
            ("GBP", 2),
            ("CHF", 2),
            ("JPY", 0),
            ("KRW", 0),
            ("KWD", 3),
            ("BHD", 3),
            ("JOD", 3),
        ],
    )
    def test_named_by_the_spec(self, code, digits):
        assert minor_units(code) == digits

    @pytest.mark.parametrize(
        ("code", "digits"),
        [("CAD", 2), ("AUD", 2), ("INR", 2), ("OMR", 3), ("TND", 3), ("CLP", 0), ("CLF", 4)],
    )
    def test_from_the_library(self, code, digits):
        assert minor_units(code) == digits

    @pytest.mark.parametrize("code", ["ZZZ", "ABC", "XXX", "XTS", "XAU"])
    def test_unknown_code(self, code):
        with pytest.raises(ValueError, match="unknown currency"):
            minor_units(code)

    @pytest.mark.parametrize("code", ["usd", "US", "USDX", "", " USD", "U$D", None, 840])
    def test_malformed_code(self, code):
        with pytest.raises(ValueError, match="ISO 4217"):
            minor_units(code)


class TestCheckAmount:
    @pytest.mark.parametrize(
        ("value", "currency"),
        [
            ("1000", "USD"),
            ("1000.1", "USD"),
            ("1000.10", "USD"),
            ("1000.100", "USD"),  # trailing zeros are fine
            ("1000.10000000", "USD"),
            ("0", "USD"),
            ("0.00", "EUR"),
            ("-0", "USD"),
            ("1E+6", "USD"),
            ("300000.00", "GBP"),
            ("10", "JPY"),
            ("10.0", "JPY"),
            ("10.000", "KRW"),
            ("1E+2", "JPY"),
            ("1234.567", "KWD"),
            ("1234.5670", "BHD"),
            ("0.001", "JOD"),
            ("123456789012345678901234567890123456.78", "USD"),
        ],
    )
    def test_accepted(self, value, currency):
        assert check_amount(Decimal(value), currency) is None

    def test_int_accepted(self):
        check_amount(1000, "JPY")

    @pytest.mark.parametrize(
        ("value", "currency"),
        [
            ("1000.105", "USD"),
            ("1000.001", "EUR"),
            ("0.001", "USD"),
            ("10.5", "JPY"),
            ("0.1", "KRW"),
            ("1234.5671", "KWD"),
            ("1E-10", "USD"),
            ("123456789012345678901234567890123456.781", "USD"),
        ],
    )
    def test_finer_than_minor_unit(self, value, currency):
        with pytest.raises(ValueError, match="minor unit"):
            check_amount(Decimal(value), currency)

    @pytest.mark.parametrize("value", ["-0.01", "-1", "-1000"])
    def test_negative(self, value):
        with pytest.raises(ValueError, match="negative"):
            check_amount(Decimal(value), "USD")

    @pytest.mark.parametrize("value", ["NaN", "sNaN", "Infinity", "-Infinity"])
    def test_not_finite(self, value):
        with pytest.raises(ValueError, match="finite"):
            check_amount(Decimal(value), "USD")

    def test_unknown_currency(self):
        with pytest.raises(ValueError):
            check_amount(Decimal("1"), "ZZZ")

    @pytest.mark.parametrize("value", [1.5, "1.5", None, True])
    def test_wrong_type(self, value):
        with pytest.raises(TypeError):
            check_amount(value, "USD")


class TestCreditAmount:
    @pytest.mark.parametrize(
        ("rate", "base", "currency", "expected"),
        [
            ("25", "1200000", "USD", "300000.00"),
            ("25", "1200000.00", "USD", "300000.00"),
            ("25", "300000", "JPY", "75000"),
            ("25", "4938.268", "KWD", "1234.567"),
            ("25", "1000.10", "EUR", "250.03"),  # 250.025 -> half-up
            ("25", "1000.02", "EUR", "250.01"),  # 250.005 -> half-up
            ("25", "1000.06", "EUR", "250.02"),  # 250.015 -> half-up
            ("25", "0.02", "USD", "0.01"),  # 0.005 -> 0.01
            ("25", "0.01", "USD", "0.00"),  # 0.0025 -> 0.00
            ("25", "2", "JPY", "1"),  # 0.5 yen -> 1
            ("25", "10", "JPY", "3"),  # 2.5 yen -> 3 (half-up, not half-even)
            ("25", "18", "JPY", "5"),  # 4.5 yen -> 5
            ("25", "6", "JPY", "2"),  # 1.5 yen -> 2
            ("25", "1", "JPY", "0"),  # 0.25 yen -> 0
            ("25", "3", "JPY", "1"),  # 0.75 yen -> 1
            ("25", "0.002", "BHD", "0.001"),  # 0.0005 -> 0.001
            ("25", "1.234", "BHD", "0.309"),  # 0.3085 -> 0.309
            ("25", "1.226", "KWD", "0.307"),  # 0.3065 -> 0.307
            ("25", "0", "USD", "0.00"),
            ("0", "1200000", "USD", "0.00"),
            ("100", "1234.56", "USD", "1234.56"),
            ("12.5", "1000", "USD", "125.00"),
            ("33.333", "100", "USD", "33.33"),
            ("25", "1E+6", "USD", "250000.00"),
            ("25", "1000.100", "USD", "250.03"),
            ("25", "1200000", "CLF", "300000.0000"),
        ],
    )
    def test_values(self, rate, base, currency, expected):
        amount = credit_amount(Decimal(rate), Decimal(base), currency)
        assert isinstance(amount, Decimal)
        assert str(amount) == expected

    def test_exponent_is_the_minor_unit(self):
        assert credit_amount(Decimal("25"), Decimal("1200000"), "USD").as_tuple().exponent == -2
        assert credit_amount(Decimal("25"), Decimal("300000"), "JPY").as_tuple().exponent == 0
        assert credit_amount(Decimal("25"), Decimal("4"), "KWD").as_tuple().exponent == -3

    def test_huge_values_are_exact(self):
        base = Decimal("4" + "0" * 39 + ".02")  # 25 % is 1E+39 + 0.005
        amount = credit_amount(Decimal("25"), base, "USD")
        assert str(amount) == "1" + "0" * 39 + ".01"
        assert Fraction(amount) - Fraction(base) / 4 == Fraction(5, 1000)

    def test_int_arguments(self):
        assert str(credit_amount(25, 1200000, "USD")) == "300000.00"

    @pytest.mark.parametrize(
        ("rate", "base"),
        [("-1", "100"), ("25", "-100"), ("NaN", "100"), ("25", "Infinity")],
    )
    def test_refused(self, rate, base):
        with pytest.raises(ValueError):
            credit_amount(Decimal(rate), Decimal(base), "USD")

    def test_float_refused(self):
        with pytest.raises(TypeError):
            credit_amount(0.25, Decimal("100"), "USD")

    def test_unknown_currency(self):
        with pytest.raises(ValueError):
            credit_amount(Decimal("25"), Decimal("100"), "ZZZ")


class TestFormatAmount:
    @pytest.mark.parametrize(
        ("value", "currency", "expected"),
        [
            ("300000", "USD", "300000.00"),
            ("300000.0", "USD", "300000.00"),
            ("1000.100", "USD", "1000.10"),
            ("75000", "JPY", "75000"),
            ("75000.00", "JPY", "75000"),
            ("0.5", "JPY", "1"),
            ("2.5", "JPY", "3"),
            ("2.49", "JPY", "2"),
            ("1234.567", "KWD", "1234.567"),
            ("1234.5", "BHD", "1234.500"),
            ("1234.5675", "JOD", "1234.568"),
            ("0.005", "USD", "0.01"),
            ("0.004999", "USD", "0.00"),
            ("1E+6", "USD", "1000000.00"),
            ("1E-9", "USD", "0.00"),
            ("0", "USD", "0.00"),
            ("-0", "USD", "0.00"),
            ("-0.001", "USD", "0.00"),
            ("-2.5", "JPY", "-3"),
            ("-1.005", "USD", "-1.01"),
        ],
    )
    def test_values(self, value, currency, expected):
        assert format_amount(Decimal(value), currency) == expected

    def test_int_value(self):
        assert format_amount(5, "USD") == "5.00"

    def test_refused(self):
        with pytest.raises(ValueError):
            format_amount(Decimal("NaN"), "USD")
        with pytest.raises(ValueError):
            format_amount(Decimal("1"), "usd")
