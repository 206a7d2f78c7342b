"""The year status rule (on track / at risk / missed), exhaustively over small years."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from yoco.guarantee import rules
from yoco.guarantee.status import AT_RISK, AT_RISK_BUDGET, MET, MISSED, live_needed, year_status

TARGETS = [Decimal(0), Decimal(50), Decimal("90"), Decimal("99.5"), Decimal(100)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("closed, ended", [(False, False), (False, True), (True, True)])
def test_every_small_year(target, closed, ended):
    for eligible in range(0, 25):
        for live in range(0, eligible + 1):
            status = year_status(
                live=live, eligible=eligible, target=target, closed=closed, ended=ended,
                closed_at=datetime(2027, 1, 8, tzinfo=UTC),
            )  # fmt: skip
            meets = rules.meets(live, eligible, target)
            budget = rules.remaining_budget(live, eligible, target)
            if closed or ended:
                assert status.status == (MET if meets else MISSED)
                assert status.label.endswith("(closing)") == (not closed)
            else:
                # An open year is never missed, whatever its figures.
                assert status.status != MISSED
                at_risk = not meets or (eligible > 0 and budget is not None and budget <= 2)
                assert status.status == (AT_RISK if at_risk else MET)
                if not meets:
                    needed = live_needed(live, eligible, target)
                    if needed is not None:
                        assert rules.meets(live + needed, eligible + needed, target)
                        if needed:
                            assert not rules.meets(live + needed - 1, eligible + needed - 1, target)
                    else:
                        assert target == 100


def test_wording():
    assert year_status(live=0, eligible=0, target=Decimal(90), closed=False, ended=False).label == (
        "On track"
    )
    near = year_status(live=29, eligible=30, target=Decimal(90), closed=False, ended=False)
    assert near.status == AT_RISK and f"Only {AT_RISK_BUDGET} more" in near.detail
    far = year_status(live=100, eligible=100, target=Decimal(90), closed=False, ended=False)
    assert far.detail == "11 more non-live failures can be absorbed this year."
    zero = year_status(live=0, eligible=5, target=Decimal(0), closed=False, ended=False)
    assert zero.status == MET
