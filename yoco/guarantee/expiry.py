"""Storing what time alone decides: pending incidents past their deadline become failed.

Reads never wait for this (they apply `rules.outcome_as_of` themselves); it runs as the periodic
task, after every fold of ingested events and before a year closes, so that stored outcomes and
year counts catch up with the clock.
"""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from yoco.guarantee.models import Incident
from yoco.guarantee.years import refresh_years
from yoco.lib.vocabulary import FAILED, PENDING


def expire_pending(now: datetime | None = None) -> int:
    """A conditional UPDATE (no locks); returns how many incidents it turned failed."""
    now = now or timezone.now()
    with transaction.atomic():
        expired = Incident.objects.filter(
            outcome=PENDING, computed_outcome=PENDING, deadline_at__lt=now
        )
        touched = set(expired.values_list("contract_id", "year_number").distinct())
        if not touched:
            return 0
        changed = expired.update(computed_outcome=FAILED, outcome=FAILED)
        refresh_years(touched)
    return changed
