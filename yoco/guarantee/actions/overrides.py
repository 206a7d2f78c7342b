"""The account team's outcome of an incident (SPEC 4.3): set with a reason, or cleared."""

from django.db import transaction
from django.utils import timezone

from yoco.accounts.actions import audit, require_account_team, require_reason
from yoco.guarantee.models import Incident
from yoco.guarantee.years import refresh_years
from yoco.lib.errors import ActionError
from yoco.lib.vocabulary import OVERRIDE_OUTCOMES


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
    """Inside the caller's transaction."""
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
    with transaction.atomic(durable=True):
        return override_outcome(incident, outcome=outcome, actor=actor, reason=reason)


def override_outcome(incident, *, outcome: str, actor, reason: str):
    """`do_override_outcome` inside the caller's transaction (upholding a dispute is one)."""
    require_account_team(actor)
    reason = require_reason(reason)
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
    require_account_team(actor)
    reason = require_reason(reason)
    with transaction.atomic(durable=True):
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
