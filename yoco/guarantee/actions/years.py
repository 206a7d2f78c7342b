"""Closing a contract year (freezing its result, earning the credit of a miss) and reopening it."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from yoco.accounts.actions import audit, require_account_team, require_reason
from yoco.guarantee import rules
from yoco.guarantee.actions.credits import change_credit, earn_credit
from yoco.guarantee.changes import announce_year_status
from yoco.guarantee.evidence import evidence_hash, snapshot
from yoco.guarantee.expiry import expire_pending
from yoco.guarantee.models import ContractYear, Credit, Dispute
from yoco.guarantee.years import count_outcomes, eligible, stored_status
from yoco.lib.errors import ActionError


def open_disputes(year: ContractYear) -> int:
    """How many disputes of the year's incidents await an answer (the year waits for them)."""
    return Dispute.objects.filter(
        state=Dispute.OPEN,
        incident__contract_id=year.contract_id,
        incident__year_number=year.number,
    ).count()


def due_years(now: datetime):
    """The open years whose end plus grace has passed at `now`."""
    return [
        year
        for year in ContractYear.objects.filter(state=ContractYear.OPEN).select_related("contract")
        if now >= year.end + year.contract.grace
    ]


def do_close_year(year: ContractYear, *, now: datetime, actor=None) -> bool:
    """Close one open year as of `now`: freeze its counts and earn the credit of a miss (once).

    Returns False when the year was not open (someone else closed it first) or when one of its
    incidents has an open dispute (SPEC 4.7: the year waits for the answer)."""
    with transaction.atomic(durable=True):
        if open_disputes(year):
            return False
        expire_pending(now)  # the frozen counts hold what time alone decided by `now`
        counts = count_outcomes(year.contract_id, year.number)
        year.refresh_from_db()
        before = stored_status(year)
        # A conditional UPDATE instead of a lock: only one closer wins.
        evidence = snapshot(year, counts, now)
        closed = ContractYear.objects.filter(pk=year.pk, state=ContractYear.OPEN).update(
            state=ContractYear.CLOSED,
            counts=counts,
            closed_at=now,
            needs_review=False,
            evidence=evidence,
        )
        if not closed:
            return False
        year.refresh_from_db()
        announce_year_status(year, before, stored_status(year))
        audit(
            actor,
            "close_year",
            year,
            before={"state": ContractYear.OPEN},
            after={
                "state": ContractYear.CLOSED,
                "counts": counts,
                "evidence_hash": evidence_hash(evidence),
            },
        )
        live, total = counts["live_resolved"], eligible(counts)
        if not rules.meets(live, total, year.contract.target):
            earn_credit(year, evidence, actor)
        return True


def do_close_due_years(now: datetime | None = None, actor=None) -> list[ContractYear]:
    """Close every open year whose end plus grace has passed at `now` (each its own
    transaction, so one refused year does not hold back the others)."""
    now = now or timezone.now()
    return [year for year in due_years(now) if do_close_year(year, now=now, actor=actor)]


def do_close_year_now(year: ContractYear, *, actor, reason: str = "") -> bool:
    """The account team closes a year by hand (before its grace period is over).

    Refused before the year has ended; otherwise the same as the periodic close."""
    require_account_team(actor)
    now = timezone.now()
    if now < year.end:
        raise ActionError(f"year {year.number} runs until {year.end:%Y-%m-%d}; it cannot close yet")
    return do_close_year(year, now=now, actor=actor)


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
    require_account_team(actor)
    reason = require_reason(reason)
    with transaction.atomic(durable=True):
        current = ContractYear.objects.get(pk=year.pk)
        if current.state != ContractYear.CLOSED:
            raise ActionError(f"year {current.number} is not closed")
        if current.credits.filter(state=Credit.EXPORTED).exists():
            raise ActionError(
                f"year {current.number} has an exported credit; it cannot be reopened"
            )
        before = _year_snapshot(current)
        reopened = ContractYear.objects.filter(pk=current.pk, state=ContractYear.CLOSED).update(
            state=ContractYear.OPEN,
            closed_at=None,
            needs_review=False,
            review_note="",
            evidence={},
        )
        if not reopened:
            raise ActionError(f"year {current.number} was changed by someone else meanwhile")
        for credit in current.credits.filter(state__in=(Credit.EARNED, Credit.APPROVED)):
            change_credit(
                credit,
                allowed=(Credit.EARNED, Credit.APPROVED),
                changes={"state": Credit.VOIDED},
                actor=actor,
                action="void_credit",
                reason=f"year {current.number} reopened: {reason}",
            )
        counts = count_outcomes(current.contract_id, current.number)
        ContractYear.objects.filter(pk=current.pk).update(counts=counts)
        closed_status = stored_status(current)
        current.refresh_from_db()
        announce_year_status(current, closed_status, stored_status(current))
        audit(
            actor,
            "reopen_year",
            current,
            reason=reason,
            before=before,
            after=_year_snapshot(current),
        )
    return current
