"""Every released rules version stays callable: the current one is released, an old snapshot is
re-derived with the version it names, and a version never released is refused."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from yoco.guarantee import rules

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def fact(id_, type_, minute, **data):
    time = T0.replace(minute=minute)
    return rules.EventFact(id_, "/clusters/east/jobs/j", f"io.yoco.{type_}", time, data)


def failure(id_):
    return fact(id_, "failure.detected", 0, trigger="unplanned", category="gpu_xid")


def inputs(*incidents):
    return rules.YearInputs(
        begin=datetime(2026, 1, 1, tzinfo=UTC),
        end=datetime(2027, 1, 1, tzinfo=UTC),
        terms=rules.Terms(),
        target=Decimal("90"),
        now=datetime(2027, 1, 8, tzinfo=UTC),
        incidents=incidents,
    )


LIVE = rules.IncidentInputs(
    id=1,
    events=(
        failure("a"),
        fact("b", "migration.completed", 4, steps_lost=0, duration_ms=900),
        fact("c", "job.resumed", 5, step=3),
    ),
    job_frameworks=frozenset({"pytorch"}),
)
FAILED = rules.IncidentInputs(id=2, events=(failure("d"),))
OVERRIDDEN = rules.IncidentInputs(id=3, events=(failure("e"),), override="excluded")
UNSUPPORTED = rules.IncidentInputs(id=4, events=(failure("f"),), job_frameworks=frozenset({"x"}))
NO_DETECTION = rules.IncidentInputs(id=6, events=(fact("h", "job.resumed", 5, step=3),))


def test_the_current_version_is_released():
    assert rules.released(rules.RULES_VERSION) is rules.RELEASED_RULES[rules.RULES_VERSION]


def test_version_1_re_derives_a_year():
    derived = rules.released("1")(inputs(LIVE, FAILED, OVERRIDDEN, UNSUPPORTED, NO_DETECTION))
    assert derived.outcomes == {1: "live_resolved", 2: "failed", 3: "excluded", 4: "excluded",
                                6: None}  # fmt: skip
    assert derived.counts == {"live_resolved": 1, "rolled_back": 0, "failed": 1, "pending": 0,
                              "excluded": 2, "planned": 0}  # fmt: skip
    assert derived.eligible == 2 and derived.meets is False


def test_an_incident_detected_outside_the_year_counts_for_nothing():
    late = rules.YearInputs(**{**inputs(LIVE).__dict__, "begin": datetime(2026, 6, 1, tzinfo=UTC)})
    derived = rules.released("1")(late)
    assert derived.outcomes == {1: None} and derived.eligible == 0 and derived.meets is True


def test_an_old_snapshot_is_re_derived_with_the_version_it_names(monkeypatch):
    def everything_live(year):
        return rules.YearDerivation(
            outcomes={i.id: "live_resolved" for i in year.incidents},
            counts={"live_resolved": len(year.incidents)},
            eligible=len(year.incidents),
            meets=True,
        )

    monkeypatch.setitem(rules.RELEASED_RULES, "0", everything_live)
    assert rules.released("0")(inputs(FAILED)).meets is True
    assert rules.released("1")(inputs(FAILED)).meets is False


@pytest.mark.parametrize("version", ["0", "2", "", None, 1])
def test_a_version_never_released_is_refused(version):
    with pytest.raises(rules.UnknownRulesVersion, match="was never released"):
        rules.released(version)
