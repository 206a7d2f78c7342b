"""Contract-year results: counting a year's incidents and reading its result as of now."""

from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from yoco.guarantee import rules
from yoco.guarantee.changes import announce_year_status
from yoco.guarantee.models import Contract, ContractYear, Incident
from yoco.guarantee.rules import eligible
from yoco.guarantee.status import YearStatus, year_status
from yoco.lib.vocabulary import OUTCOMES, PENDING


def terms_of(contract: Contract) -> rules.Terms:
    return rules.Terms(
        deadline=contract.deadline,
        supported_frameworks=frozenset(contract.frameworks),
        excluded_categories=frozenset(contract.excluded_categories),
    )


def count_outcomes(contract_id: int, number: int) -> dict[str, int]:
    """The year's incidents by their stored outcome."""
    counts = dict.fromkeys(OUTCOMES, 0)
    rows = (
        Incident.objects.filter(contract_id=contract_id, year_number=number, outcome__isnull=False)
        .values("outcome")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in rows:
        counts[row["outcome"]] = row["n"]
    return counts


def stored_status(year: ContractYear, counts: dict | None = None) -> YearStatus:
    """The status (SPEC 4.8) of the year's stored result (`counts` instead, when given): an open
    year is on track or at risk, never missed; a closed one met or missed."""
    counts = year.counts if counts is None else counts
    closed = year.state == ContractYear.CLOSED
    return year_status(
        live=counts.get("live_resolved", 0),
        eligible=eligible(counts),
        target=year.contract.target,
        closed=closed,
        ended=closed,
        closed_at=year.closed_at,
    )


def refresh_years(touched: Iterable[tuple[int, int]]) -> None:
    """Store fresh counts on open years; a closed year whose result would change is flagged.

    Each year's row is locked before its incidents are counted, in one order, so two folds
    (of two clusters of one contract) cannot both count before either commits and leave the
    older count stored."""
    pairs = {(c, n) for c, n in touched if c is not None and n is not None}
    with transaction.atomic():
        for contract_id, number in sorted(pairs):
            _refresh_year(contract_id, number)


def _refresh_year(contract_id: int, number: int) -> None:
    year = ContractYear.objects.select_for_update().get(contract_id=contract_id, number=number)
    counts = count_outcomes(contract_id, number)
    if year.state == ContractYear.OPEN:
        if counts != year.counts:
            ContractYear.objects.filter(pk=year.pk, state=ContractYear.OPEN).update(counts=counts)
            before = stored_status(year)
            year.counts = counts
            announce_year_status(year, before, stored_status(year))
    elif counts != year.counts and not year.needs_review:
        ContractYear.objects.filter(pk=year.pk, state=ContractYear.CLOSED).update(
            needs_review=True,
            review_note="events received after closing would change its counts to "
            + ", ".join(f"{k} {v}" for k, v in counts.items()),
        )


def _expired_pending(years: Sequence[ContractYear], now: datetime) -> dict[tuple[int, int], int]:
    """Per open (contract, year): stored-pending incidents whose deadline is past at `now`."""
    open_years = [y for y in years if y.state == ContractYear.OPEN]
    if not open_years:
        return {}
    rows = (
        Incident.objects.filter(
            contract_id__in={y.contract_id for y in open_years},
            year_number__in={y.number for y in open_years},
            outcome=PENDING,
            deadline_at__lt=now,
        )
        .values("contract_id", "year_number")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {(row["contract_id"], row["year_number"]): row["n"] for row in rows}


def result_of(counts: dict[str, int], target) -> dict:
    """A year's counts with what follows from them."""
    counts = {outcome: counts.get(outcome, 0) for outcome in OUTCOMES}
    live, total = counts["live_resolved"], eligible(counts)
    return {
        "counts": counts,
        "eligible": total,
        "compliance": rules.compliance(live, total),
        "meets": rules.meets(live, total, target),
    }


def year_results(years: Sequence[ContractYear], now: datetime | None = None) -> list[dict]:
    """Each year's result as of `now` (one query): a closed year's frozen counts; an open year's
    stored counts with its pending incidents past their deadline counted as failed
    (`rules.counts_as_of`), as the periodic expiry will store them."""
    now = now or timezone.now()
    expired = _expired_pending(years, now)
    return [
        result_of(
            rules.counts_as_of(year.counts, expired.get((year.contract_id, year.number), 0)),
            year.contract.target,
        )
        for year in years
    ]


def year_result(year: ContractYear, now: datetime | None = None) -> dict:
    """The result of one year as of `now` (for the API, the portal and the close command)."""
    return year_results([year], now)[0]
