"""Property tests of the guarantee's pure rules (hypothesis)."""

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from yoco.guarantee import rules
from yoco.guarantee.rules import (
    EventFact,
    Terms,
    check_amount,
    compliance,
    credit_amount,
    detection,
    format_amount,
    meets,
    minor_units,
    outcome,
    remaining_budget,
    year_bounds,
    year_number,
)
from yoco.lib import vocabulary

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SOURCES = ("/clusters/c1/jobs/j1", "/clusters/c1/jobs/j2")

offsets = st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)

# Times clustered around the 15-minute deadline so that its boundary is hit often.
times = st.one_of(
    st.integers(min_value=-120, max_value=2 * 3600).map(lambda s: T0 + timedelta(seconds=s)),
    st.sampled_from([-1, 0, 1]).map(lambda us: T0 + timedelta(minutes=15, microseconds=us)),
    st.just(T0),
)


@st.composite
def events(draw):
    type_ = draw(st.sampled_from(vocabulary.EVENT_TYPES))
    if type_ == vocabulary.FAILURE_DETECTED:
        data = {
            "trigger": draw(st.sampled_from(vocabulary.TRIGGERS)),
            "category": draw(st.sampled_from(["gpu_xid", "power", "sdc", "software_user"])),
        }
        scope = draw(st.sampled_from([None, "node", "network_wide"]))
        if scope is not None:
            data["scope"] = scope
    elif type_ in (vocabulary.MIGRATION_COMPLETED, vocabulary.CHECKPOINT_RESTORED):
        data = {"steps_lost": draw(st.sampled_from([0, 0, 0, 1, 7])), "duration_ms": 10}
    elif type_ == vocabulary.JOB_STARTED:
        data = {"framework": "pytorch", "world_size": 8}
    else:
        data = {"x": 1}
    # Ids drawn from a small pool: equal (time, id) ties between detections happen.
    id_ = draw(st.sampled_from("abcdefgh")) + type_.rsplit(".", 1)[-1]
    time = draw(times).astimezone(draw(offsets))
    return EventFact(
        id=id_, source=draw(st.sampled_from(SOURCES)), type=type_, time=time, data=data
    )


def unique_events(items):
    """Stored events are unique by (source, id): keep the first of each."""
    seen = {}
    for event in items:
        seen.setdefault((event.source, event.id), event)
    return list(seen.values())


terms_st = st.builds(
    Terms,
    deadline=st.sampled_from([timedelta(0), timedelta(minutes=15), timedelta(hours=1)]),
    supported_frameworks=st.sampled_from(
        [rules.DEFAULT_SUPPORTED_FRAMEWORKS, frozenset({"pytorch"}), frozenset()]
    ),
    excluded_categories=st.sampled_from(
        [rules.DEFAULT_EXCLUDED_CATEGORIES, frozenset(), frozenset({"power"})]
    ),
)
frameworks_st = st.lists(st.sampled_from(["pytorch", "deepspeed", "jax"]), max_size=3)


@settings(max_examples=200, deadline=None)
@given(
    items=st.lists(events(), max_size=12).map(unique_events),
    data=st.data(),
    terms=terms_st,
    frameworks=frameworks_st,
    now=times,
)
def test_outcome_independent_of_order_and_duplicates(items, data, terms, frameworks, now):
    expected = outcome(items, job_frameworks=frameworks, terms=terms, now=now)
    shuffled = data.draw(st.permutations(items))
    repeats = data.draw(st.lists(st.sampled_from(items), max_size=8)) if items else []
    again = data.draw(st.permutations(shuffled + repeats))
    fw_again = data.draw(st.permutations(frameworks + frameworks))
    assert outcome(again, job_frameworks=fw_again, terms=terms, now=now) == expected
    assert outcome(iter(again), job_frameworks=iter(fw_again), terms=terms, now=now) == expected
    assert detection(again) == detection(items)


@settings(max_examples=200, deadline=None)
@given(
    items=st.lists(events(), max_size=12).map(unique_events),
    terms=terms_st,
    frameworks=frameworks_st,
    now=times,
)
def test_outcome_is_consistent(items, terms, frameworks, now):
    result = outcome(items, job_frameworks=frameworks, terms=terms, now=now)
    found = detection(items)
    if found is None:
        assert result is None
        return
    assert result in vocabulary.OUTCOMES
    if result == "pending":
        assert now <= found.time + terms.deadline
    if result == "failed":
        assert now > found.time + terms.deadline
    # An incident that is not planned or excluded is decided no later than the deadline
    # passes, and later time never undoes a decision.
    later = outcome(items, job_frameworks=frameworks, terms=terms, now=now + timedelta(days=1))
    if result != "pending":
        assert later == result
    else:
        # Only the clock separates pending from failed.
        assert later == "failed"


starts = st.dates(min_value=date(1990, 1, 1), max_value=date(2200, 12, 31)) | st.sampled_from(
    [date(2024, 2, 29), date(2096, 2, 29), date(2000, 2, 29), date(2023, 2, 28)]
)


@settings(max_examples=300, deadline=None)
@given(
    start=starts,
    years=st.integers(min_value=0, max_value=12),
    delta=st.integers(min_value=-400 * 86400 * 10**6, max_value=14 * 366 * 86400 * 10**6),
    tz=offsets,
    near_bound=st.booleans(),
    k=st.integers(min_value=1, max_value=13),
    us=st.integers(min_value=-2, max_value=1),
)
def test_year_number_agrees_with_year_bounds(start, years, delta, tz, near_bound, k, us):
    if near_bound:
        instant = year_bounds(start, k)[0] + timedelta(microseconds=us)
    else:
        instant = datetime(start.year, start.month, start.day, tzinfo=UTC) + timedelta(
            microseconds=delta
        )
    instant = instant.astimezone(tz)
    number = year_number(start, years, instant)
    if number is None:
        for j in range(1, years + 1):
            begin, end = year_bounds(start, j)
            assert not begin <= instant < end
    else:
        assert 1 <= number <= years
        begin, end = year_bounds(start, number)
        assert begin <= instant < end


@settings(max_examples=200, deadline=None)
@given(start=starts, k=st.integers(min_value=1, max_value=40))
def test_years_tile_and_last_about_a_year(start, k):
    begin, end = year_bounds(start, k)
    assert year_bounds(start, k + 1)[0] == end
    assert timedelta(days=365) <= end - begin <= timedelta(days=366)
    assert begin.tzinfo is UTC and begin.time() == end.time() == datetime.min.time()
    assert begin.month == start.month
    assert begin.day == start.day or (start.day == 29 and start.month == 2 and begin.day == 28)


counts = st.integers(min_value=0, max_value=10**6).flatmap(
    lambda eligible: st.tuples(st.integers(min_value=0, max_value=eligible), st.just(eligible))
)
targets = st.decimals(min_value=0, max_value=100, places=3, allow_nan=False)


def half_up(value: Fraction, places: int) -> Fraction:
    scaled = value * 10**places
    floor = scaled.numerator // scaled.denominator
    return Fraction(floor + (1 if scaled - floor >= Fraction(1, 2) else 0), 10**places)


@settings(max_examples=500, deadline=None)
@given(counts=counts, target=targets)
def test_meets_agrees_with_fractions(counts, target):
    live, eligible = counts
    if eligible == 0:
        assert meets(live, eligible, target)
        assert compliance(live, eligible) is None
        return
    rate = Fraction(live, eligible)
    assert meets(live, eligible, target) == (rate * 100 >= Fraction(target))
    value = compliance(live, eligible)
    assert Fraction(value) == half_up(rate, 4)
    assert value.as_tuple().exponent == -4


@settings(max_examples=300, deadline=None)
@given(counts=counts, target=targets)
def test_remaining_budget_is_the_largest_absorbable(counts, target):
    live, eligible = counts
    budget = remaining_budget(live, eligible, target)
    if target == 0:
        assert budget is None
        return
    assert budget >= 0
    if meets(live, eligible, target):
        assert meets(live, eligible + budget, target)
        assert not meets(live, eligible + budget + 1, target)
    else:
        assert budget == 0


currencies = st.sampled_from(["USD", "EUR", "GBP", "CHF", "JPY", "KRW", "KWD", "BHD", "JOD", "CLF"])


@settings(max_examples=300, deadline=None)
@given(
    currency=currencies,
    base=st.decimals(min_value=0, max_value=10**12, places=6, allow_nan=False),
    rate=st.decimals(min_value=0, max_value=100, places=3, allow_nan=False),
)
def test_credit_amount_is_half_up_of_the_exact_product(currency, base, rate):
    places = minor_units(currency)
    amount = credit_amount(rate, base, currency)
    assert Fraction(amount) == half_up(Fraction(base) * Fraction(rate) / 100, places)
    assert amount.as_tuple().exponent == -places
    text = str(amount)
    assert text == format_amount(amount, currency)
    assert (len(text.split(".")[1]) if "." in text else 0) == places
    check_amount(amount, currency)


@settings(max_examples=300, deadline=None)
@given(currency=currencies, value=st.decimals(allow_nan=False, allow_infinity=False, places=6))
def test_check_amount_matches_rounding(currency, value):
    places = minor_units(currency)
    whole = Fraction(value) * 10**places
    ok = value >= 0 and whole.denominator == 1
    try:
        check_amount(value, currency)
    except ValueError:
        assert not ok
    else:
        assert ok
    assert Fraction(format_amount(value, currency)) == (
        half_up(Fraction(value), places) if value >= 0 else -half_up(-Fraction(value), places)
    )
    if ok:
        assert Fraction(Decimal(format_amount(value, currency))) == Fraction(value)


@settings(max_examples=200, deadline=None)
@given(currency=currencies, m=st.integers(min_value=0, max_value=10**15))
def test_exact_ties_round_half_up(currency, m):
    places = minor_units(currency)
    # (m + 1/2) minor units: an exact tie, which goes up (never to even).
    tie = Decimal(f"{2 * m + 1}E-{places}") * Decimal("0.5")
    up = Decimal(f"{m + 1}E-{places}") if places else Decimal(m + 1)
    assert format_amount(tie, currency) == str(up)
    assert format_amount(-tie, currency) == str(-up)
    # A 50 % credit on an odd number of minor units is such a tie.
    odd = Decimal(f"{2 * m + 1}E-{places}") if places else Decimal(2 * m + 1)
    assert credit_amount(Decimal("50"), odd, currency) == up
    assert str(credit_amount(Decimal("50"), odd, currency)) == str(up)


@settings(max_examples=200, deadline=None)
@given(k=st.integers(min_value=0, max_value=9999))
def test_compliance_ties_round_half_up(k):
    # (2k + 1) / 20000 = (k + 1/2) / 10000 exactly.
    assert compliance(2 * k + 1, 20000) == Decimal(k + 1).scaleb(-4)


REASON_OUTCOMES = {
    rules.PLANNED_TRIGGER: vocabulary.PLANNED,
    rules.NETWORK_WIDE: vocabulary.EXCLUDED,
    rules.EXCLUDED_CATEGORY: vocabulary.EXCLUDED,
    rules.UNSUPPORTED_FRAMEWORK: vocabulary.EXCLUDED,
    rules.CHECKPOINT_RESTORE: vocabulary.ROLLED_BACK,
    rules.LOSSY_MIGRATION: vocabulary.ROLLED_BACK,
    rules.LIVE_RESUME: vocabulary.LIVE_RESOLVED,
    rules.WITHIN_DEADLINE: vocabulary.PENDING,
    rules.LATE_RESUME: vocabulary.FAILED,
    rules.RESUME_WITHOUT_MIGRATION: vocabulary.FAILED,
    rules.MIGRATION_FAILURE: vocabulary.FAILED,
    rules.NO_RECOVERY: vocabulary.FAILED,
}


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(events(), max_size=12).map(unique_events),
    data=st.data(),
    terms=terms_st,
    frameworks=frameworks_st,
    now=times,
)
def test_decision_and_its_reason_are_one_evaluation(items, data, terms, frameworks, now):
    decision = rules.decide(items, job_frameworks=frameworks, terms=terms, now=now)
    # The reason is as independent of order and repetition as the outcome.
    again = data.draw(st.permutations(items + items))
    assert rules.decide(again, job_frameworks=frameworks, terms=terms, now=now) == decision
    if decision.outcome is None:
        assert decision.reason == rules.NO_DETECTION
        return
    assert REASON_OUTCOMES[decision.reason] == decision.outcome
    assert decision.deadline == decision.detection.time + terms.deadline
    assert all(event in items for event in decision.cited)
    cited_types = [event.type for event in decision.cited]
    expected_types = {
        rules.CHECKPOINT_RESTORE: [vocabulary.CHECKPOINT_RESTORED],
        rules.LOSSY_MIGRATION: [vocabulary.MIGRATION_COMPLETED],
        rules.LIVE_RESUME: [vocabulary.MIGRATION_COMPLETED, vocabulary.JOB_RESUMED],
        rules.LATE_RESUME: [vocabulary.MIGRATION_COMPLETED, vocabulary.JOB_RESUMED],
        rules.RESUME_WITHOUT_MIGRATION: [vocabulary.JOB_RESUMED],
        rules.MIGRATION_FAILURE: [vocabulary.MIGRATION_FAILED],
    }.get(decision.reason, [])
    assert cited_types == expected_types
    if decision.reason == rules.LIVE_RESUME:
        assert decision.cited[1].time <= decision.deadline
    if decision.reason == rules.LATE_RESUME:
        assert decision.cited[1].time > decision.deadline
    if decision.reason == rules.UNSUPPORTED_FRAMEWORK:
        assert decision.unsupported and not set(decision.unsupported) & terms.supported_frameworks


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(events(), max_size=12).map(unique_events),
    terms=terms_st,
    frameworks=frameworks_st,
    stored_at=times,
    later=st.integers(min_value=0, max_value=3 * 3600).map(lambda s: timedelta(seconds=s)),
)
def test_reading_a_stored_outcome_later_equals_deciding_then(
    items, terms, frameworks, stored_at, later
):
    """What reads show (`outcome_as_of` over the outcome stored at fold time) is what the
    rules decide at the time of the read, for the same events."""
    stored = rules.decide(items, job_frameworks=frameworks, terms=terms, now=stored_at)
    read_at = stored_at + later
    shown = rules.outcome_as_of(stored.outcome, stored.deadline, read_at)
    assert shown == rules.outcome(items, job_frameworks=frameworks, terms=terms, now=read_at)


@given(
    counts=st.fixed_dictionaries({o: st.integers(0, 50) for o in vocabulary.OUTCOMES}),
    expired=st.integers(0, 60),
)
def test_counts_as_of_moves_expired_pending_to_failed(counts, expired):
    result = rules.counts_as_of(counts, expired)
    moved = min(expired, counts["pending"])
    assert result["pending"] == counts["pending"] - moved
    assert result["failed"] == counts["failed"] + moved
    assert sum(result.values()) == sum(counts.values())
    assert {k: v for k, v in result.items() if k not in ("pending", "failed")} == {
        k: v for k, v in counts.items() if k not in ("pending", "failed")
    }
