"""Disputes (SPEC 4.7): a customer objects to an incident's outcome; the account team upholds
the objection (recording an override whose reason is the answer) or rejects it, with a reason."""

from django.db import transaction
from django.utils import timezone

from yoco.accounts.actions import audit, require_account_team, require_reason
from yoco.guarantee.actions.overrides import override_outcome
from yoco.guarantee.models import Dispute, Incident
from yoco.lib.errors import ActionError

MAX_REASON = 5000


def _snapshot(dispute: Dispute) -> dict:
    return {
        "state": dispute.state,
        "answer": dispute.answer,
        "answered_by": dispute.answered_by.username if dispute.answered_by_id else None,
    }


def do_open_dispute(incident: Incident, *, reason: str, user=None, label: str = "") -> Dispute:
    """A customer disputes `incident` (a portal `user`, or a read token named by `label`).

    Refused for an incident that counts toward no contract year, and while another dispute of
    the same incident is still open."""
    reason = require_reason(reason)
    if len(reason) > MAX_REASON:
        raise ActionError(f"the reason is longer than {MAX_REASON} characters")
    actor = user if getattr(user, "pk", None) else None
    with transaction.atomic(durable=True):
        current = Incident.objects.select_for_update().get(pk=incident.pk)
        if current.contract_id is None or current.computed_outcome is None:
            raise ActionError("this incident counts toward no contract year; nothing to dispute")
        if current.disputes.filter(state=Dispute.OPEN).exists():
            raise ActionError("this incident already has an open dispute")
        dispute = Dispute.objects.create(
            incident=current,
            reason=reason,
            opened_by=actor,
            opened_by_label=(actor.get_username() if actor else label) or "read token",
        )
        audit(
            actor or dispute.opened_by_label,
            "open_dispute",
            dispute,
            reason=reason,
            after={"state": Dispute.OPEN, "incident": current.pk, "outcome": current.outcome},
        )
    return dispute


def _answer(dispute: Dispute, *, state: str, actor, reason: str, outcome: str | None) -> Dispute:
    require_account_team(actor)
    reason = require_reason(reason)
    with transaction.atomic(durable=True):
        current = Dispute.objects.select_related("incident").get(pk=dispute.pk)
        before = _snapshot(current)
        # Conditional on the dispute still being open: two answers cannot both win.
        answered = Dispute.objects.filter(pk=current.pk, state=Dispute.OPEN).update(
            state=state, answer=reason, answered_by=actor, answered_at=timezone.now()
        )
        if not answered:
            raise ActionError(f"dispute {current.pk} is already {current.state}")
        if outcome is not None:
            override_outcome(
                current.incident,
                outcome=outcome,
                actor=actor,
                reason=f"dispute {current.pk} upheld: {reason}",
            )
        current.refresh_from_db()
        action = "uphold_dispute" if state == Dispute.UPHELD else "reject_dispute"
        audit(actor, action, current, reason=reason, before=before, after=_snapshot(current))
    return current


def do_uphold_dispute(dispute: Dispute, *, outcome: str, actor, reason: str) -> Dispute:
    """Uphold: the incident's outcome is overridden to `outcome` with this reason, in the same
    transaction (an open year's counts follow; a closed year is marked for review; an exported
    credit never changes)."""
    return _answer(dispute, state=Dispute.UPHELD, actor=actor, reason=reason, outcome=outcome)


def do_reject_dispute(dispute: Dispute, *, actor, reason: str) -> Dispute:
    """Reject: the outcome stands; the customer sees the reason."""
    return _answer(dispute, state=Dispute.REJECTED, actor=actor, reason=reason, outcome=None)
