"""Making a contract: its customer, clusters, keys, years and read token, in one transaction."""

from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.db import transaction

from yoco.accounts.actions import audit
from yoco.accounts.models import Cluster, ClusterKey, Customer, ReadToken
from yoco.guarantee import rules
from yoco.guarantee.models import Contract, ContractYear
from yoco.lib.errors import ActionError
from yoco.lib.vocabulary import CATEGORIES, FRAMEWORKS, OUTCOMES


@dataclass(frozen=True)
class NewContract:
    contract: Contract
    cluster_keys: dict[str, str]
    read_token: str


def _check_percentage(name: str, value: Decimal) -> None:
    if not value.is_finite() or not (0 <= value <= 100):
        raise ActionError(f"{name} must be a percentage between 0 and 100, got {value}")


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


def do_create_contract(
    *,
    customer_name: str,
    start: date,
    years: int,
    annual_value: Decimal,
    currency: str,
    clusters: list[str],
    target: Decimal = rules.DEFAULT_TARGET,
    credit_rate: Decimal = rules.DEFAULT_CREDIT_RATE,
    deadline_minutes: int = rules.DEFAULT_DEADLINE_MINUTES,
    grace_days: int = rules.DEFAULT_GRACE_DAYS,
    excluded_categories: list[str] | None = None,
    frameworks: list[str] | None = None,
    actor=None,
) -> NewContract:
    """A contract for a customer (made if new) over named clusters (made if new), with one
    ingest key per cluster and a read token, all returned once. Events that arrived before it
    are folded into it after commit."""
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
    default_excluded = [c for c in CATEGORIES if c in rules.DEFAULT_EXCLUDED_CATEGORIES]
    excluded = list(dict.fromkeys(excluded_categories or default_excluded))
    supported = list(dict.fromkeys(frameworks or FRAMEWORKS))
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

    with transaction.atomic(durable=True):
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
                counts=dict.fromkeys(OUTCOMES, 0),
            )
        _, read_token = ReadToken.objects.create_key(
            name=f"{customer.name} read", customer=customer
        )
        audit(actor, "create_contract", contract, after=contract_snapshot(contract))
        transaction.on_commit(lambda: _refold_clusters(contract.pk))
    return NewContract(contract=contract, cluster_keys=keys, read_token=read_token)


def _refold_clusters(contract_id: int) -> None:
    """Events that arrived before this contract covered their cluster now count in it."""
    from yoco.guarantee.tasks import refold_contract_task

    refold_contract_task.delay(contract_id)
