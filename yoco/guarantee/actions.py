"""Every state change of the guarantee: one `do_*` function each, one transaction, its audit
record written inside it. Views, the admin and management commands call these."""

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.utils import timezone

from yoco.accounts.models import Cluster, ClusterKey, Customer, ReadToken
from yoco.guarantee import rules
from yoco.guarantee.models import (
    DEFAULT_EXCLUDED_CATEGORIES,
    DEFAULT_FRAMEWORKS,
    AuditRecord,
    Contract,
    ContractYear,
    Credit,
)
from yoco.guarantee.years import count_outcomes, eligible

SYSTEM = "system"


class ActionError(ValueError):
    """A refused change, with a message fit to show to the person who asked for it."""


def audit(actor, action: str, obj, *, reason: str = "", before=None, after=None) -> AuditRecord:
    return AuditRecord.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        actor_label=getattr(actor, "username", None) or str(actor or SYSTEM),
        action=action,
        object_type=type(obj).__name__,
        object_id=str(obj.pk),
        reason=reason,
        before=before,
        after=after,
    )


@dataclass(frozen=True)
class NewContract:
    contract: Contract
    cluster_keys: dict[str, str]
    read_token: str


def _check_percentage(name: str, value: Decimal) -> None:
    if not value.is_finite() or not (0 <= value <= 100):
        raise ActionError(f"{name} must be a percentage between 0 and 100, got {value}")


def do_create_contract(
    *,
    customer_name: str,
    start: date,
    years: int,
    annual_value: Decimal,
    currency: str,
    clusters: list[str],
    target: Decimal = Decimal("90"),
    credit_rate: Decimal = Decimal("25"),
    deadline_minutes: int = 15,
    grace_days: int = 7,
    excluded_categories: list[str] | None = None,
    frameworks: list[str] | None = None,
    actor=None,
) -> NewContract:
    from yoco.events.schema import CATEGORIES, FRAMEWORKS

    currency = currency.upper()
    if not customer_name.strip():
        raise ActionError("the customer name must not be empty")
    if years < 1:
        raise ActionError(f"a contract runs at least one year, got {years}")
    try:
        rules.check_amount(annual_value, currency)
    except ValueError as exc:
        raise ActionError(str(exc)) from None
    _check_percentage("target", target)
    _check_percentage("credit rate", credit_rate)
    if deadline_minutes < 1:
        raise ActionError("the recovery deadline must be at least one minute")
    if grace_days < 0:
        raise ActionError("the grace period cannot be negative")
    excluded = list(dict.fromkeys(excluded_categories or DEFAULT_EXCLUDED_CATEGORIES))
    supported = list(dict.fromkeys(frameworks or DEFAULT_FRAMEWORKS))
    for category in excluded:
        if category not in CATEGORIES:
            raise ActionError(f"unknown failure category {category!r}")
    for framework in supported:
        if framework not in FRAMEWORKS:
            raise ActionError(f"unknown framework {framework!r}")
    if not clusters:
        raise ActionError("a contract covers at least one cluster")
    if len(set(clusters)) != len(clusters):
        raise ActionError("a cluster is named twice")
    bad = [name for name in clusters if not name or "/" in name or name.strip() != name]
    if bad:
        raise ActionError(f"cluster names may not be empty or hold '/' or spaces: {bad}")

    with transaction.atomic():
        customer, created = Customer.objects.get_or_create(name=customer_name.strip())
        contract = Contract.objects.create(
            customer=customer,
            start=start,
            years=years,
            annual_value=annual_value,
            currency=currency,
            target=target,
            credit_rate=credit_rate,
            deadline_minutes=deadline_minutes,
            grace_days=grace_days,
            frameworks=supported,
            excluded_categories=excluded,
        )
        end = rules.year_bounds(start, years)[1]
        keys = {}
        for name in clusters:
            cluster, _ = Cluster.objects.get_or_create(name=name, defaults={"customer": customer})
            if cluster.customer_id != customer.pk:
                raise ActionError(f"cluster {name!r} is already covered by another customer")
            for other in cluster.contracts.all():
                other_start = rules.year_bounds(other.start, 1)[0]
                other_end = rules.year_bounds(other.start, other.years)[1]
                if other_start < end and rules.year_bounds(start, 1)[0] < other_end:
                    raise ActionError(
                        f"cluster {name!r} is already covered by contract {other.pk} over "
                        "an overlapping period"
                    )
            contract.clusters.add(cluster)
            _, keys[name] = ClusterKey.objects.create_key(name=f"{name} ingest", cluster=cluster)
        for number in range(1, years + 1):
            year_start, year_end = rules.year_bounds(start, number)
            ContractYear.objects.create(
                contract=contract,
                number=number,
                start=year_start,
                end=year_end,
                counts=dict.fromkeys(rules.OUTCOMES, 0),
            )
        _, read_token = ReadToken.objects.create_key(
            name=f"{customer.name} read", customer=customer
        )
        audit(actor, "create_contract", contract, after=contract_snapshot(contract))
        transaction.on_commit(lambda: _refold_clusters(contract.pk))
    return NewContract(contract=contract, cluster_keys=keys, read_token=read_token)


def _refold_clusters(contract_id: int) -> None:
    """Events that arrived before this contract covered their cluster now count in it."""
    from yoco.events.tasks import refold_contract_task

    refold_contract_task.delay(contract_id)


def contract_snapshot(contract: Contract) -> dict:
    return {
        "customer": contract.customer.name,
        "start": contract.start.isoformat(),
        "years": contract.years,
        "annual_value": rules.format_amount(Decimal(contract.annual_value), contract.currency),
        "currency": contract.currency,
        "target": str(contract.target),
        "credit_rate": str(contract.credit_rate),
        "deadline_minutes": contract.deadline_minutes,
        "grace_days": contract.grace_days,
        "frameworks": contract.frameworks,
        "excluded_categories": contract.excluded_categories,
        "clusters": sorted(c.name for c in contract.clusters.all()),
    }


def credit_snapshot(credit: Credit) -> dict:
    return {
        "state": credit.state,
        "amount": rules.format_amount(Decimal(credit.amount), credit.currency),
        "currency": credit.currency,
        "basis": credit.basis,
        "order_value": None if credit.order_value is None else str(credit.order_value),
    }


def do_close_year(year: ContractYear, *, now: datetime, actor=None) -> bool:
    """Close one open year: freeze its counts and earn the credit of a miss (once).

    Returns False when the year was not open (someone else closed it first)."""
    with transaction.atomic():
        counts = count_outcomes(year.contract_id, year.number)
        # A conditional UPDATE instead of a lock: only one closer wins.
        closed = ContractYear.objects.filter(pk=year.pk, state=ContractYear.OPEN).update(
            state=ContractYear.CLOSED, counts=counts, closed_at=now, needs_review=False
        )
        if not closed:
            return False
        year.refresh_from_db()
        audit(
            actor,
            "close_year",
            year,
            before={"state": ContractYear.OPEN},
            after={"state": ContractYear.CLOSED, "counts": counts},
        )
        contract = year.contract
        live, total = counts["live_resolved"], eligible(counts)
        if not rules.meets(live, total, contract.target):
            _earn_credit(year, counts, actor)
        return True


def _earn_credit(year: ContractYear, counts: dict, actor) -> Credit | None:
    from yoco.events.models import Incident

    contract = year.contract
    incident_ids = list(
        Incident.objects.filter(contract=contract, year_number=year.number, outcome__isnull=False)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    evidence = {
        "counts": counts,
        "eligible": eligible(counts),
        "target": str(contract.target),
        "incident_ids": incident_ids,
        "rules_version": rules.RULES_VERSION,
    }
    amount = rules.credit_amount(
        contract.credit_rate, Decimal(contract.annual_value), contract.currency
    )
    try:
        with transaction.atomic():
            credit = Credit.objects.create(
                contract_year=year, amount=amount, currency=contract.currency, evidence=evidence
            )
    except IntegrityError:
        return None  # a live credit for this year exists already
    record = audit(actor, "earn_credit", credit, after=credit_snapshot(credit))
    Credit.objects.filter(pk=credit.pk).update(change_seq=record.pk)
    return credit


def do_close_due_years(now: datetime | None = None, actor=None) -> list[ContractYear]:
    """Close every open year whose end plus grace has passed at `now`."""
    from yoco.events.fold import expire_pending

    now = now or timezone.now()
    expire_pending(now)
    closed = []
    for year in ContractYear.objects.filter(state=ContractYear.OPEN).select_related("contract"):
        if now >= year.end + year.contract.grace and do_close_year(year, now=now, actor=actor):
            closed.append(year)
    return closed
