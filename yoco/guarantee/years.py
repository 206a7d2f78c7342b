"""Contract-year results: counting a year's incidents and reading its stored state."""

from collections.abc import Iterable

from django.db import transaction
from django.db.models import Count

from yoco.guarantee import rules
from yoco.guarantee.models import Contract, ContractYear

COUNTED = ("live_resolved", "rolled_back", "failed", "pending", "excluded", "planned")


def terms_of(contract: Contract) -> rules.Terms:
    return rules.Terms(
        deadline=contract.deadline,
        supported_frameworks=frozenset(contract.frameworks),
        excluded_categories=frozenset(contract.excluded_categories),
    )


def count_outcomes(contract_id: int, number: int) -> dict[str, int]:
    from yoco.events.models import Incident  # events depends on guarantee, not the reverse

    counts = dict.fromkeys(COUNTED, 0)
    rows = (
        Incident.objects.filter(contract_id=contract_id, year_number=number, outcome__isnull=False)
        .values("outcome")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in rows:
        counts[row["outcome"]] = row["n"]
    return counts


def eligible(counts: dict[str, int]) -> int:
    return sum(counts.get(outcome, 0) for outcome in rules.ELIGIBLE)


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
    elif counts != year.counts and not year.needs_review:
        ContractYear.objects.filter(pk=year.pk, state=ContractYear.CLOSED).update(
            needs_review=True,
            review_note="events received after closing would change its counts to "
            + ", ".join(f"{k} {v}" for k, v in counts.items()),
        )


def year_result(year: ContractYear) -> dict:
    """The stored counts of a year with what follows from them (for the API and the portal)."""
    counts = {outcome: year.counts.get(outcome, 0) for outcome in COUNTED}
    live, total = counts["live_resolved"], eligible(counts)
    return {
        "counts": counts,
        "eligible": total,
        "compliance": rules.compliance(live, total),
        "meets": rules.meets(live, total, year.contract.target),
    }
