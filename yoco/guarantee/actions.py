"""Every state change of the guarantee: one `do_*` function each, one transaction, its audit
record written inside it. Views, the admin and management commands call these."""

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.utils import timezone

from yoco.accounts.models import Cluster, ClusterKey, Customer, Membership, ReadToken
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
    from yoco.guarantee.rules import CATEGORIES, FRAMEWORKS

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
    _lock_change_sequence()
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


# --- Account team and billing (issue 4) -----------------------------------------------------
#
# Every function below is one transaction that writes its audit record inside it. A change that
# can race (two people approving, billing acknowledging while someone voids) is a conditional
# UPDATE on the state read a moment before (`filter(pk=…, state=…, change_seq=…).update()`),
# never a lock on the row: the loser gets an ActionError and nothing is written.
#
# Every credit change stores the id of its audit record in Credit.change_seq, the append-only
# sequence the billing export pages on. So that a reader never sees a larger sequence number
# commit before a smaller one (which would let its cursor skip the smaller), the transactions
# that hand out credit sequence numbers are serialised: on PostgreSQL by a transaction-level
# advisory lock taken just before the audit record is inserted (SQLite serialises every write
# anyway).

CHANGE_SEQ_LOCK = 0x59_4F_43_4F  # "YOCO": the advisory lock key of the credit change sequence


def _lock_change_sequence() -> None:
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CHANGE_SEQ_LOCK])


def _require_account_team(actor) -> None:
    """The account team are the active staff users (the admin is theirs alone)."""
    if actor is None or not getattr(actor, "is_authenticated", False):
        raise ActionError("only a signed-in account-team member may do this")
    if not (actor.is_active and actor.is_staff):
        raise ActionError(f"{actor} is not on the account team")


def _require_reason(reason: str | None) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ActionError("a reason is required")
    return reason


def _change_credit(
    credit: Credit,
    *,
    allowed: tuple[str, ...],
    changes: dict,
    actor,
    action: str,
    reason: str = "",
) -> Credit:
    """Apply `changes` to a credit still in the state (and sequence) read, audit it, re-sequence.

    Must run inside a transaction. Refuses (ActionError) a credit not in `allowed`, or one
    that someone else changed since it was read."""
    current = Credit.objects.get(pk=credit.pk)
    if current.state not in allowed:
        raise ActionError(
            f"credit {current.pk} is {current.state}; this needs it to be {' or '.join(allowed)}"
        )
    before = credit_snapshot(current)
    updated = Credit.objects.filter(
        pk=current.pk, state=current.state, change_seq=current.change_seq
    ).update(**changes)
    if not updated:
        raise ActionError(f"credit {current.pk} was changed by someone else meanwhile; reload")
    current.refresh_from_db()
    _lock_change_sequence()
    record = audit(
        actor, action, current, reason=reason, before=before, after=credit_snapshot(current)
    )
    Credit.objects.filter(pk=current.pk).update(change_seq=record.pk)
    current.change_seq = record.pk
    return current


def do_approve_credit(credit: Credit, *, actor, reason: str = "") -> Credit:
    """earned → approved, four-eyes (SPEC 4.5).

    The approver must not be the person who last changed the credit's amount
    (`amount_changed_by`, set when an order value is booked). A credit whose amount nobody
    changed — earned by the system from the contract's annual value — may be approved by any
    account-team member: the system computed the amount, so a person approving it is already the
    second pair of eyes."""
    _require_account_team(actor)
    with transaction.atomic():
        current = Credit.objects.get(pk=credit.pk)
        if current.amount_changed_by_id is not None and current.amount_changed_by_id == actor.pk:
            raise ActionError(
                f"four-eyes rule: {actor} set this credit's amount, so someone else must approve it"
            )
        return _change_credit(
            current,
            allowed=(Credit.EARNED,),
            changes={"state": Credit.APPROVED},
            actor=actor,
            action="approve_credit",
            reason=reason,
        )


def do_void_credit(credit: Credit, *, actor, reason: str) -> Credit:
    """earned or approved → voided, with a reason. An exported credit is never changed."""
    _require_account_team(actor)
    reason = _require_reason(reason)
    with transaction.atomic():
        return _change_credit(
            credit,
            allowed=(Credit.EARNED, Credit.APPROVED),
            changes={"state": Credit.VOIDED},
            actor=actor,
            action="void_credit",
            reason=reason,
        )


def do_book_order(credit: Credit, *, order_value: Decimal, actor, reason: str = "") -> Credit:
    """Book the renewal or expansion order: amount = credit rate × order value (SPEC 4.5).

    The actor becomes `amount_changed_by`, so someone else must approve. An approved credit
    whose amount changes goes back to earned; an exported or voided one is refused."""
    _require_account_team(actor)
    if isinstance(order_value, bool) or not isinstance(order_value, Decimal | int):
        raise ActionError("the order value must be a decimal number")
    order_value = Decimal(order_value)
    with transaction.atomic():
        current = Credit.objects.select_related("contract_year__contract").get(pk=credit.pk)
        contract = current.contract_year.contract
        try:
            rules.check_amount(order_value, current.currency)
            amount = rules.credit_amount(contract.credit_rate, order_value, current.currency)
        except (TypeError, ValueError) as exc:
            raise ActionError(str(exc)) from None
        return _change_credit(
            current,
            allowed=(Credit.EARNED, Credit.APPROVED),
            changes={
                "state": Credit.EARNED,
                "amount": amount,
                "basis": Credit.BASIS_ORDER,
                "order_value": order_value,
                "amount_changed_by": actor,
            },
            actor=actor,
            action="book_order",
            reason=reason,
        )


def do_export_credit(credit: Credit, *, actor) -> tuple[Credit, bool]:
    """Billing acknowledged the credit: approved → exported.

    Idempotent: an already exported credit is returned unchanged (no audit record, same
    change_seq). Returns (credit, changed). Any other state is refused."""
    with transaction.atomic():
        current = Credit.objects.get(pk=credit.pk)
        if current.state == Credit.EXPORTED:
            return current, False
        return (
            _change_credit(
                current,
                allowed=(Credit.APPROVED,),
                changes={"state": Credit.EXPORTED},
                actor=actor,
                action="export_credit",
                reason="acknowledged by billing",
            ),
            True,
        )


def _year_snapshot(year: ContractYear) -> dict:
    return {
        "state": year.state,
        "counts": year.counts,
        "closed_at": year.closed_at.isoformat() if year.closed_at else None,
        "needs_review": year.needs_review,
        "review_note": year.review_note,
    }


def do_reopen_year(year: ContractYear, *, actor, reason: str) -> ContractYear:
    """closed → open, with a reason; its result is live again until it is closed once more.

    Refused while the year's credit is exported: billing has it, an exported credit is never
    changed, and a correction of a billed credit is a commercial matter outside this flow.
    A live credit not yet exported (earned or approved) is voided in the same transaction
    (reason: the reopening), so that closing the year again earns a fresh credit with fresh
    evidence if it still misses; the void's audit record keeps any booked order value."""
    _require_account_team(actor)
    reason = _require_reason(reason)
    with transaction.atomic():
        current = ContractYear.objects.get(pk=year.pk)
        if current.state != ContractYear.CLOSED:
            raise ActionError(f"year {current.number} is not closed")
        if current.credits.filter(state=Credit.EXPORTED).exists():
            raise ActionError(
                f"year {current.number} has an exported credit; it cannot be reopened"
            )
        before = _year_snapshot(current)
        reopened = ContractYear.objects.filter(pk=current.pk, state=ContractYear.CLOSED).update(
            state=ContractYear.OPEN, closed_at=None, needs_review=False, review_note=""
        )
        if not reopened:
            raise ActionError(f"year {current.number} was changed by someone else meanwhile")
        for credit in current.credits.filter(state__in=(Credit.EARNED, Credit.APPROVED)):
            _change_credit(
                credit,
                allowed=(Credit.EARNED, Credit.APPROVED),
                changes={"state": Credit.VOIDED},
                actor=actor,
                action="void_credit",
                reason=f"year {current.number} reopened: {reason}",
            )
        counts = count_outcomes(current.contract_id, current.number)
        ContractYear.objects.filter(pk=current.pk).update(counts=counts)
        current.refresh_from_db()
        audit(
            actor,
            "reopen_year",
            current,
            reason=reason,
            before=before,
            after=_year_snapshot(current),
        )
    return current


OVERRIDE_OUTCOMES = ("live_resolved", "rolled_back", "failed", "excluded", "planned")


def _incident_snapshot(incident) -> dict:
    return {
        "outcome": incident.outcome,
        "computed_outcome": incident.computed_outcome,
        "override_outcome": incident.override_outcome,
        "override_reason": incident.override_reason,
        "override_by": incident.override_by.username if incident.override_by_id else None,
        "override_at": incident.override_at.isoformat() if incident.override_at else None,
    }


def _set_override(incident, *, actor, action: str, reason: str, fields: dict):
    from yoco.events.models import Incident
    from yoco.guarantee.years import refresh_years

    with transaction.atomic():
        current = Incident.objects.select_related("override_by").get(pk=incident.pk)
        if current.contract_id is None or current.computed_outcome is None:
            raise ActionError(
                "this incident counts toward no contract year (no failure.detected, or detected "
                "outside every contract year); there is nothing to override"
            )
        if action == "clear_override":
            if current.override_outcome is None:
                raise ActionError("this incident has no override")
            fields["outcome"] = current.computed_outcome
        before = _incident_snapshot(current)
        # Conditional on the version read: a fold that saved the incident meanwhile wins.
        if not Incident.objects.filter(pk=current.pk, updated=current.updated).update(**fields):
            raise ActionError("the incident was changed meanwhile; reload and try again")
        current = Incident.objects.select_related("override_by").get(pk=current.pk)
        # An open year's counts follow; a closed year is flagged for review, never changed.
        refresh_years([(current.contract_id, current.year_number)])
        audit(
            actor,
            action,
            current,
            reason=reason,
            before=before,
            after=_incident_snapshot(current),
        )
    return current


def do_override_outcome(incident, *, outcome: str, actor, reason: str):
    """The account team sets an incident's outcome, with a reason (SPEC 4.3).

    The override, its reason, author and time are kept on the incident and survive every later
    fold. The year's counts are refreshed; a closed year is marked needs_review instead."""
    _require_account_team(actor)
    reason = _require_reason(reason)
    if outcome not in OVERRIDE_OUTCOMES:
        raise ActionError(f"an override outcome is one of {', '.join(OVERRIDE_OUTCOMES)}")
    now = timezone.now()
    return _set_override(
        incident,
        actor=actor,
        action="override_outcome",
        reason=reason,
        fields={
            "override_outcome": outcome,
            "override_reason": reason,
            "override_by": actor,
            "override_at": now,
            "outcome": outcome,
            "updated": now,
        },
    )


def do_clear_override(incident, *, actor, reason: str):
    """Back to the computed outcome; the override stays in the audit history."""
    _require_account_team(actor)
    reason = _require_reason(reason)
    return _set_override(
        incident,
        actor=actor,
        action="clear_override",
        reason=reason,
        fields={
            "override_outcome": None,
            "override_reason": "",
            "override_by": None,
            "override_at": None,
            # "outcome" becomes the computed outcome
            "updated": timezone.now(),
        },
    )


def _audit_key(actor, action: str, key, *, reason: str = "", before=None, after=None):
    # A key's primary key holds its hash: the audit names it by its public prefix only.
    return AuditRecord.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        actor_label=getattr(actor, "username", None) or str(actor or SYSTEM),
        action=action,
        object_type=type(key).__name__,
        object_id=key.prefix,
        reason=reason,
        before=before,
        after=after,
    )


def _key_snapshot(key) -> dict:
    return {"prefix": key.prefix, "name": key.name, "revoked": key.revoked}


def do_create_cluster_key(cluster: Cluster, *, actor, reason: str = "") -> tuple[ClusterKey, str]:
    """A further ingest key for a cluster; the key itself is returned once and never stored."""
    _require_account_team(actor)
    with transaction.atomic():
        record, key = ClusterKey.objects.create_key(name=f"{cluster.name} ingest", cluster=cluster)
        _audit_key(actor, "create_key", record, reason=reason, after=_key_snapshot(record))
    return record, key


def do_rotate_cluster_key(cluster: Cluster, *, actor, reason: str = "") -> tuple[ClusterKey, str]:
    """A new ingest key for the cluster, every older one revoked, in one transaction.

    The new key is returned once (show it, never store it)."""
    _require_account_team(actor)
    with transaction.atomic():
        old = list(ClusterKey.objects.filter(cluster=cluster, revoked=False))
        ClusterKey.objects.filter(pk__in=[k.pk for k in old], revoked=False).update(revoked=True)
        record, key = ClusterKey.objects.create_key(name=f"{cluster.name} ingest", cluster=cluster)
        audit(
            actor,
            "rotate_cluster_key",
            cluster,
            reason=reason,
            before={"active_keys": sorted(k.prefix for k in old)},
            after={"active_keys": [record.prefix], "revoked": sorted(k.prefix for k in old)},
        )
    return record, key


def do_revoke_key(key, *, actor, reason: str = "") -> bool:
    """Revoke an ingest key, read token or billing token (cannot be undone).

    Returns False when it was already revoked (nothing written)."""
    _require_account_team(actor)
    with transaction.atomic():
        revoked = type(key).objects.filter(pk=key.pk, revoked=False).update(revoked=True)
        if not revoked:
            return False
        before = _key_snapshot(key) | {"revoked": False}
        key.refresh_from_db()
        _audit_key(actor, "revoke_key", key, reason=reason, before=before, after=_key_snapshot(key))
    return True


def do_create_read_token(customer: Customer, *, actor, reason: str = "") -> tuple[ReadToken, str]:
    """A further read token for a customer; returned once."""
    _require_account_team(actor)
    with transaction.atomic():
        record, key = ReadToken.objects.create_key(name=f"{customer.name} read", customer=customer)
        _audit_key(actor, "create_key", record, reason=reason, after=_key_snapshot(record))
    return record, key


def do_create_billing_token(*, name: str = "billing", actor=None, reason: str = ""):
    """A billing token (the credit export's only credential); returned once."""
    from yoco.accounts.models import BillingToken

    name = (name or "").strip()
    if not name or len(name) > 50:
        raise ActionError("a billing token needs a name of 1 to 50 characters")
    with transaction.atomic():
        record, key = BillingToken.objects.create_key(name=name)
        _audit_key(actor, "create_key", record, reason=reason, after=_key_snapshot(record))
    return record, key


def do_close_year_now(year: ContractYear, *, actor, reason: str = "") -> bool:
    """The account team closes a year by hand (before its grace period is over).

    Refused before the year has ended; otherwise the same as the periodic close."""
    _require_account_team(actor)
    now = timezone.now()
    if now < year.end:
        raise ActionError(f"year {year.number} runs until {year.end:%Y-%m-%d}; it cannot close yet")
    return do_close_year(year, now=now, actor=actor)


def do_create_customer(*, name: str, actor, reason: str = "") -> Customer:
    _require_account_team(actor)
    name = (name or "").strip()
    if not name:
        raise ActionError("the customer name must not be empty")
    with transaction.atomic():
        if Customer.objects.filter(name=name).exists():
            raise ActionError(f"a customer named {name!r} exists already")
        customer = Customer.objects.create(name=name)
        audit(actor, "create_customer", customer, reason=reason, after={"name": name})
    return customer


def do_add_member(customer: Customer, user, *, actor, reason: str = "") -> Membership:
    """Give a portal user to a customer (a user belongs to one customer only)."""
    _require_account_team(actor)
    with transaction.atomic():
        existing = Membership.objects.filter(user=user).select_related("customer").first()
        if existing is not None:
            if existing.customer_id == customer.pk:
                return existing
            raise ActionError(f"{user} already belongs to {existing.customer}")
        membership = Membership.objects.create(user=user, customer=customer)
        audit(
            actor,
            "add_member",
            customer,
            reason=reason,
            before=None,
            after={"user": user.get_username()},
        )
    return membership


def do_remove_member(membership: Membership, *, actor, reason: str = "") -> None:
    """Take a portal user away from its customer (the membership row goes; the audit stays)."""
    _require_account_team(actor)
    with transaction.atomic():
        removed, _ = Membership.objects.filter(pk=membership.pk).delete()
        if removed:
            audit(
                actor,
                "remove_member",
                membership.customer,
                reason=reason,
                before={"user": membership.user.get_username()},
                after=None,
            )
