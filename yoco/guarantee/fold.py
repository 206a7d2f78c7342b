"""Folding stored events into jobs and incidents, and incidents into their contract years.

Everything here is recomputed from the stored events, so it gives the same answer whatever order
the events arrived in and however often it runs.
"""

from collections.abc import Iterable
from datetime import datetime

from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from yoco.accounts.models import Cluster
from yoco.events.models import Event
from yoco.guarantee import rules
from yoco.guarantee.models import Contract, Incident, Job
from yoco.guarantee.years import refresh_years, terms_of
from yoco.lib.vocabulary import JOB_FINISHED, JOB_RESUMED, JOB_STARTED


def fold(
    cluster: Cluster,
    subjects: Iterable[str],
    sources: Iterable[str],
    events: QuerySet[Event] | None = None,
) -> None:
    """Recompute the jobs of `sources` and the incidents of `subjects` (and their years) from
    `events`: by default every stored event that is not quarantined."""
    now = timezone.now()
    events = Event.objects.foldable() if events is None else events
    with transaction.atomic():
        changed_jobs = fold_jobs(cluster, sources, events)
        subjects = set(subjects)
        if changed_jobs:
            subjects |= set(
                Incident.objects.filter(cluster=cluster, source__in=changed_jobs).values_list(
                    "subject", flat=True
                )
            )
        touched = refresh_incidents(cluster, subjects, now, events)
        refresh_years(touched)


def fold_jobs(cluster: Cluster, sources: Iterable[str], events: QuerySet[Event]) -> set[str]:
    """Upsert the Job of each source from its job.* events; return sources whose terms changed."""
    changed = set()
    lifecycle = (JOB_STARTED, JOB_FINISHED)
    events_by_source: dict[str, list[Event]] = {}
    for event in events.filter(
        cluster=cluster, source__in=list(sources), type__in=lifecycle
    ).order_by("time", "event_id"):
        events_by_source.setdefault(event.source, []).append(event)
    for source, events in events_by_source.items():
        job, _ = Job.objects.get_or_create(source=source, defaults={"cluster": cluster})
        before = (sorted(job.frameworks), job.gpus)
        starts = [e for e in events if e.type == JOB_STARTED]
        finishes = [e for e in events if e.type == JOB_FINISHED]
        if starts:
            first, last = starts[0], starts[-1]
            job.frameworks = sorted({e.data["framework"] for e in starts})
            job.world_size = last.data.get("world_size")
            job.gpus = last.data.get("gpus")
            job.model = last.data.get("model") or ""
            job.mode = last.data.get("mode") or ""
            job.started_at = first.time
        if finishes:
            job.status = finishes[-1].data["status"]
            job.finished_at = finishes[-1].time
        job.save()
        if (sorted(job.frameworks), job.gpus) != before:
            changed.add(source)
    return changed


def fact_of(event: Event) -> rules.EventFact:
    """What the guarantee's rules know of a stored event."""
    return rules.EventFact(event.event_id, event.source, event.type, event.time, event.data)


def contract_for(
    contracts: list[Contract], instant: datetime
) -> tuple[Contract | None, int | None]:
    """The contract (of a cluster's `contracts`) whose term holds `instant`, with the year."""
    for contract in contracts:
        number = rules.year_number(contract.start, contract.years, instant)
        if number is not None:
            return contract, number
    return None, None


INCIDENT_FIELDS = [
    "source", "contract", "year_number", "detected_at", "deadline_at", "trigger", "category",
    "scope", "computed_outcome", "outcome", "downtime_ms", "gpus", "updated",
]  # fmt: skip


def refresh_incidents(
    cluster: Cluster, subjects: Iterable[str], now: datetime, events: QuerySet[Event]
) -> set:
    """Recompute each incident; return the (contract id, year number) pairs it touched."""
    touched: set[tuple[int, int]] = set()
    subjects = list(subjects)
    if not subjects:
        return touched
    by_subject: dict[str, list[Event]] = {}
    for event in events.filter(cluster=cluster, subject__in=subjects):
        by_subject.setdefault(event.subject, []).append(event)
    existing = {
        i.subject: i for i in Incident.objects.filter(cluster=cluster, subject__in=subjects)
    }
    sources = {e.source for events in by_subject.values() for e in events}
    jobs = {job.source: job for job in Job.objects.filter(source__in=sources)}
    contracts = list(cluster.contracts.order_by("start"))
    new, changed = [], []
    for subject, events in by_subject.items():
        incident = existing.get(subject)
        if incident is None:
            incident = Incident(cluster=cluster, subject=subject)
            new.append(incident)
        else:
            changed.append(incident)
            touched.add((incident.contract_id, incident.year_number))
        _recompute(incident, [fact_of(e) for e in events], jobs, contracts, now)
        incident.updated = now
        touched.add((incident.contract_id, incident.year_number))
    Incident.objects.bulk_create(new, batch_size=1000)
    Incident.objects.bulk_update(changed, INCIDENT_FIELDS, batch_size=1000)
    # An override made while this fold ran wins: the effective outcome follows it in SQL.
    Incident.objects.filter(pk__in=[i.pk for i in changed], override_outcome__isnull=False).update(
        outcome=F("override_outcome")
    )
    return {pair for pair in touched if pair[0] is not None}


def _recompute(incident: Incident, facts: list[rules.EventFact], jobs: dict[str, Job],
               contracts: list[Contract], now: datetime) -> None:  # fmt: skip
    found = rules.detection(facts)
    resumes = [f for f in facts if f.type == JOB_RESUMED]
    incident.downtime_ms = max((f.data.get("downtime_ms") or 0 for f in resumes), default=None)
    incident.source = found.source if found else ""
    job = jobs.get(incident.source)
    incident.gpus = job.gpus if job else None
    incident.contract, incident.year_number = (
        contract_for(contracts, found.time) if found else (None, None)
    )
    if found is None:
        incident.detected_at = None
        incident.trigger = incident.category = incident.scope = None
    else:
        incident.detected_at = found.time
        incident.trigger, incident.category = found.trigger, found.category
        incident.scope = found.scope
    if incident.contract is None:
        incident.deadline_at = incident.computed_outcome = incident.outcome = None
        return
    terms = terms_of(incident.contract)
    incident.deadline_at = rules.resolution_deadline(found.time, terms)
    incident.computed_outcome = rules.outcome(
        facts, job_frameworks=job.frameworks if job else (), terms=terms, now=now
    )
    incident.outcome = incident.override_outcome or incident.computed_outcome
