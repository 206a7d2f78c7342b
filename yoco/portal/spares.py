"""The spare-sizing advisor's history for one contract (SPEC 4.9), read from the database and
handed to the pure `yoco.guarantee.sizing.advise`.

GPU-hours: each of the contract's jobs that reported its GPUs (`job.started`), times the hours
from its first to its last event inside the contract's term. Failures: the contract's eligible
incidents with an unplanned or pre-emptive trigger, outcomes as of now.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max, Min, Q

from yoco.events.models import Event
from yoco.guarantee import rules, sizing
from yoco.guarantee.models import Contract, Incident, Job
from yoco.lib.vocabulary import ELIGIBLE, LIVE_RESOLVED, TRIGGER_PREEMPTIVE, TRIGGER_UNPLANNED


@dataclass(frozen=True)
class History:
    failures: int
    live_resolved: int
    gpu_hours: float
    jobs: int  # jobs with GPUs and at least one event in the term
    largest_job_gpus: int | None


def contract_history(contract: Contract, now: datetime) -> History:
    term_start = rules.year_bounds(contract.start, 1)[0]
    term_end = rules.year_bounds(contract.start, contract.years)[1]
    jobs = Job.objects.filter(cluster__in=contract.clusters.all(), gpus__gt=0)
    gpus = dict(jobs.values_list("source", "gpus"))
    spans = (
        Event.objects.filter(source__in=jobs.values("source"), time__gte=term_start)
        .filter(time__lt=term_end)
        .values("source")
        .annotate(first=Min("time"), last=Max("time"))
    )
    gpu_hours, counted = 0.0, []
    for span in spans:
        counted.append(gpus[span["source"]])
        gpu_hours += gpus[span["source"]] * (span["last"] - span["first"]).total_seconds() / 3600
    eligible = (
        Incident.objects.filter(
            contract=contract, trigger__in=[TRIGGER_UNPLANNED, TRIGGER_PREEMPTIVE]
        )
        .as_of(now)
        .filter(outcome_now__in=ELIGIBLE)
        .aggregate(n=Count("pk"), live=Count("pk", filter=Q(outcome_now=LIVE_RESOLVED)))
    )
    return History(
        failures=eligible["n"],
        live_resolved=eligible["live"],
        gpu_hours=gpu_hours,
        jobs=len(counted),
        largest_job_gpus=max(counted, default=None),
    )


def contract_advice(contract: Contract, now: datetime, job_gpus: int | None = None):
    """The advice for a job of `job_gpus` GPUs (default: the contract's largest job; 1 when
    no job has reported its GPUs yet), with the history it came from."""
    history = contract_history(contract, now)
    advice = sizing.advise(
        failures=history.failures,
        gpu_hours=history.gpu_hours,
        live_resolved=history.live_resolved,
        job_gpus=job_gpus or history.largest_job_gpus or 1,
        return_hours=contract.spare_return_hours,
        target=contract.target,
    )
    return history, advice
