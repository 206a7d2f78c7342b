"""A contract year's status: on track, at risk or missed (the portal's rule, SPEC 4.8).

A pure function of the year's figures, so the portal shows it and notifications can act on its
changes. An open year is never "missed": it is at risk until it closes short of the target.
"""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from yoco.guarantee import rules

MET, AT_RISK, MISSED = "met", "at_risk", "missed"
AT_RISK_BUDGET = 2  # an open year this close to its limit is "at risk"


@dataclass(frozen=True)
class YearStatus:
    status: str  # MET, AT_RISK or MISSED
    label: str  # for people: "On track", "At risk", "Missed (closing)", …
    detail: str


def live_needed(live: int, eligible: int, target: Decimal) -> int | None:
    """Further live recoveries (each adds one eligible) needed before the year meets again;
    None when no number of them can (a target of 100 % already missed)."""
    if target >= 100:
        return None
    # 100 (live + k) >= target (eligible + k)  <=>  k >= (target·eligible − 100·live)/(100−target)
    gap = target * eligible - 100 * live
    k = gap / (100 - target)
    whole = int(k)
    return whole if whole == k else whole + 1


def year_status(
    *,
    live: int,
    eligible: int,
    target: Decimal,
    closed: bool,
    ended: bool,
    closed_at: datetime | None = None,
) -> YearStatus:
    """The status of a year with `live` of `eligible` resolved live against `target` (%).

    `closed`: the year was closed (its result is final); `ended`: now is past its end (it
    closes after the grace period)."""
    meets = rules.meets(live, eligible, target)
    if closed or ended:
        if meets:
            status, label = MET, "Met" if closed else "Met (closing)"
        else:
            status, label = MISSED, "Missed" if closed else "Missed (closing)"
        detail = (
            f"Closed on {closed_at:%d %b %Y}; the result is final."
            if closed and closed_at
            else "The year has ended; it closes after the grace period for late events."
        )
        return YearStatus(status, label, detail)
    if eligible == 0:
        return YearStatus(MET, "On track", "No eligible failure yet this year.")
    if not meets:
        needed = live_needed(live, eligible, target)
        detail = (
            f"Below target: {needed:,} more consecutive live recoveries bring it back."
            if needed is not None
            else "Below target."
        )
        return YearStatus(AT_RISK, "At risk", detail)
    budget = rules.remaining_budget(live, eligible, target)
    if budget is not None and budget <= AT_RISK_BUDGET:
        plural = "s" if budget != 1 else ""
        return YearStatus(
            AT_RISK, "At risk", f"Only {budget} more non-live failure{plural} before a miss."
        )
    if budget is None:  # a target of 0 %: nothing can make the year miss
        return YearStatus(MET, "On track", "The target is 0 %: no failure can make it miss.")
    return YearStatus(
        MET, "On track", f"{budget:,} more non-live failures can be absorbed this year."
    )
