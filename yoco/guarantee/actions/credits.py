"""A credit's life (SPEC 4.5): earned → approved (four-eyes) → exported, or voided.

A change that can race (two people approving, billing acknowledging while someone voids) is a
conditional UPDATE on the state read a moment before (`filter(pk=…, state=…, change_seq=…)
.update()`), never a lock on the row: the loser gets an ActionError and nothing is written.

Every credit change stores the id of its audit record in Credit.change_seq, the append-only
sequence the billing export pages on. So that a reader never sees a larger sequence number
commit before a smaller one (which would let its cursor skip the smaller), the transactions
that hand out credit sequence numbers are serialised: `audit` locks the audit chain until the
transaction ends (`accounts.actions.lock_audit_chain`), and the sequence number is its record's
id.
"""

from decimal import Decimal

from django.db import IntegrityError, transaction

from yoco.accounts.actions import audit, require_account_team, require_reason
from yoco.guarantee import rules
from yoco.guarantee.changes import announce_credit_state
from yoco.guarantee.evidence import evidence_hash
from yoco.guarantee.models import ContractYear, Credit
from yoco.lib.errors import ActionError


def credit_snapshot(credit: Credit) -> dict:
    return {
        "state": credit.state,
        "amount": rules.format_amount(Decimal(credit.amount), credit.currency),
        "currency": credit.currency,
        "basis": credit.basis,
        "order_value": None if credit.order_value is None else str(credit.order_value),
    }


def earn_credit(year: ContractYear, evidence: dict, actor) -> Credit | None:
    """The credit of a missed year, with the year's evidence snapshot; None when a live one
    exists already. The snapshot's hash goes into the audit record (`guarantee.evidence`).

    Part of closing a year: runs inside that transaction."""
    contract = year.contract
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
    record = audit(
        actor,
        "earn_credit",
        credit,
        after={**credit_snapshot(credit), "evidence_hash": evidence_hash(evidence)},
    )
    Credit.objects.filter(pk=credit.pk).update(change_seq=record.pk)
    announce_credit_state(credit, None, credit.state)
    return credit


def change_credit(
    credit: Credit,
    *,
    allowed: tuple[str, ...],
    changes: dict,
    actor,
    action: str,
    reason: str = "",
) -> Credit:
    """Apply `changes` to a credit still in the state (and sequence) read, audit it, re-sequence.

    Runs inside the caller's transaction. Refuses (ActionError) a credit not in `allowed`, or
    one that someone else changed since it was read."""
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
    record = audit(
        actor, action, current, reason=reason, before=before, after=credit_snapshot(current)
    )
    Credit.objects.filter(pk=current.pk).update(change_seq=record.pk)
    current.change_seq = record.pk
    announce_credit_state(current, before["state"], current.state)
    return current


def do_approve_credit(credit: Credit, *, actor, reason: str = "") -> Credit:
    """earned → approved, four-eyes (SPEC 4.5).

    The approver must not be the person who last changed the credit's amount
    (`amount_changed_by`, set when an order value is booked). A credit whose amount nobody
    changed — earned by the system from the contract's annual value — may be approved by any
    account-team member: the system computed the amount, so a person approving it is already the
    second pair of eyes."""
    require_account_team(actor)
    with transaction.atomic(durable=True):
        current = Credit.objects.get(pk=credit.pk)
        if current.amount_changed_by_id is not None and current.amount_changed_by_id == actor.pk:
            raise ActionError(
                f"four-eyes rule: {actor} set this credit's amount, so someone else must approve it"
            )
        return change_credit(
            current,
            allowed=(Credit.EARNED,),
            changes={"state": Credit.APPROVED},
            actor=actor,
            action="approve_credit",
            reason=reason,
        )


def do_void_credit(credit: Credit, *, actor, reason: str) -> Credit:
    """earned or approved → voided, with a reason. An exported credit is never changed."""
    require_account_team(actor)
    reason = require_reason(reason)
    with transaction.atomic(durable=True):
        return change_credit(
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
    require_account_team(actor)
    if isinstance(order_value, bool) or not isinstance(order_value, Decimal | int):
        raise ActionError("the order value must be a decimal number")
    order_value = Decimal(order_value)
    with transaction.atomic(durable=True):
        current = Credit.objects.select_related("contract_year__contract").get(pk=credit.pk)
        contract = current.contract_year.contract
        try:
            rules.check_amount(order_value, current.currency)
            amount = rules.credit_amount(contract.credit_rate, order_value, current.currency)
        except (TypeError, ValueError) as exc:
            raise ActionError(str(exc)) from None
        return change_credit(
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
    with transaction.atomic(durable=True):
        current = Credit.objects.get(pk=credit.pk)
        if current.state == Credit.EXPORTED:
            return current, False
        return (
            change_credit(
                current,
                allowed=(Credit.APPROVED,),
                changes={"state": Credit.EXPORTED},
                actor=actor,
                action="export_credit",
                reason="acknowledged by billing",
            ),
            True,
        )
