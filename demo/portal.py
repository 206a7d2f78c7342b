"""A realistic data set for the portal: screenshots, browser tests and the benchmark.

`seed_portal_demo` makes one customer with a three-year contract whose first year is closed
(and missed, so it earned a credit) and whose second year is running, a few incidents ingested
as real CloudEvents (so their pages show a timeline and a reason) and any number of further
incidents written in bulk (`bulk_create`, each with the events its outcome follows from, stored
as processed: the fold would give each the outcome it has, so a closed year's evidence re-derives).
Customers, memberships, contracts, overrides and closings go through the platform's `do_*`
actions, as the account team's would.
"""

import random
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from yoco.accounts.actions import do_add_member
from yoco.accounts.models import Cluster
from yoco.events.ingest import canonical_json, content_hash, ingest_events
from yoco.events.models import Event
from yoco.events.schema import parse_time
from yoco.guarantee import rules
from yoco.guarantee.actions import do_close_year, do_create_contract, do_override_outcome
from yoco.guarantee.fold import fold
from yoco.guarantee.models import Contract, ContractYear, Incident, Job
from yoco.guarantee.years import refresh_years

CATEGORY_WEIGHTS = {
    "gpu_xid": 24, "gpu_ecc": 14, "gpu_hang": 9, "gpu_thermal": 4, "nvlink": 10, "pcie": 4,
    "node_crash": 9, "host_memory": 5, "power": 3, "network_link": 7, "storage": 3,
    "software_infra": 4, "software_user": 2, "unknown": 2,
}  # fmt: skip
JOBS = (("llama-405b-pretrain", 2048, "torchtitan"), ("moe-1t", 1024, "megatron-lm"),
        ("vision-70b", 512, "deepspeed"), ("rl-finetune", 256, "pytorch"))  # fmt: skip


@dataclass
class DemoData:
    contract: Contract
    cluster: Cluster
    owner: object
    teammate: object
    staff: object | None
    showcase: dict[str, Incident] = field(default_factory=dict)


def _months_back(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 - months
    return date(index // 12, index % 12 + 1, 1)


def _user(username: str, password: str, **extra):
    User = get_user_model()
    user, created = User.objects.get_or_create(username=username, defaults=extra)
    if created:
        user.set_password(password)
        user.save()
    return user


def _bot():
    """The account-team member the seeding acts as when it makes no staff user (no login)."""
    user, created = get_user_model().objects.get_or_create(
        username="demo-seeder", defaults={"is_staff": True}
    )
    if created:
        user.set_unusable_password()
        user.save()
    return user


def _event(kind, cluster, job, subject, at: datetime, **data):
    event = {
        "specversion": "1.0",
        "id": f"{subject}-{kind}-{int(at.timestamp() * 1000)}",
        "source": f"/clusters/{cluster}/jobs/{job}",
        "type": f"io.yoco.{kind}",
        "time": at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        "data": data,
    }
    if subject:
        event["subject"] = subject
    return event


def _showcase_events(cluster: str, now: datetime) -> dict[str, list[dict]]:
    """A handful of incidents told as events, one per interesting outcome."""
    day = now.replace(microsecond=0) - timedelta(days=2, hours=5)
    job, job2 = JOBS[0][0], JOBS[1][0]
    s = timedelta(seconds=1)
    return {
        "live_resolved": [
            _event("failure.detected", cluster, job, "inc-live", day, trigger="unplanned",
                   category="gpu_xid", xid=79, node="gpu-node-117", device=3, rank=931,
                   step=48210, detail="GPU has fallen off the bus"),
            _event("migration.started", cluster, job, "inc-live", day + 4 * s,
                   mode="model_aware", state_source="replica", source={"node": "gpu-node-117"},
                   target={"node": "spare-node-06"}, bytes=412_316_860_416, spare="standby"),
            _event("migration.completed", cluster, job, "inc-live", day + 141 * s,
                   steps_lost=0, duration_ms=137_480, bytes=412_316_860_416, resumed_step=48210,
                   verified=True),
            _event("job.resumed", cluster, job, "inc-live", day + 152 * s, step=48210,
                   downtime_ms=152_300),
        ],
        "rolled_back": [
            _event("failure.detected", cluster, job2, "inc-rollback", day - timedelta(hours=30),
                   trigger="unplanned", category="node_crash", node="gpu-node-044",
                   detail="kernel panic"),
            _event("migration.started", cluster, job2, "inc-rollback",
                   day - timedelta(hours=30) + 3 * s, mode="transparent", state_source="self"),
            _event("migration.failed", cluster, job2, "inc-rollback",
                   day - timedelta(hours=30) + 40 * s, reason="source node unreachable"),
            _event("checkpoint.restored", cluster, job2, "inc-rollback",
                   day - timedelta(hours=30) + 21 * 60 * s, steps_lost=612,
                   checkpoint_step=96000, duration_ms=1_140_000),
            _event("job.resumed", cluster, job2, "inc-rollback",
                   day - timedelta(hours=30) + 23 * 60 * s, step=96000, downtime_ms=1_380_000),
        ],
        "failed": [
            _event("failure.detected", cluster, job, "inc-failed", day - timedelta(hours=55),
                   trigger="preemptive", category="gpu_ecc", node="gpu-node-201",
                   detail="uncorrectable ECC errors rising"),
            _event("migration.started", cluster, job, "inc-failed",
                   day - timedelta(hours=55) + 2 * s, mode="model_aware", state_source="mirror"),
            _event("migration.failed", cluster, job, "inc-failed",
                   day - timedelta(hours=55) + 95 * s, reason="no spare node with free NVLink"),
        ],
        "overridden": [
            _event("failure.detected", cluster, job2, "inc-power", day - timedelta(hours=70),
                   trigger="unplanned", category="power", node="gpu-node-310",
                   detail="PDU breaker trip in rack R31"),
            _event("migration.started", cluster, job2, "inc-power",
                   day - timedelta(hours=70) + 2 * s, mode="model_aware", state_source="replica"),
            _event("migration.failed", cluster, job2, "inc-power",
                   day - timedelta(hours=70) + 61 * s, reason="target rack lost power as well"),
        ],
        "excluded": [
            _event("failure.detected", cluster, job, "inc-user-bug", day - timedelta(hours=80),
                   trigger="unplanned", category="software_user", rank=12,
                   detail="CUDA error: illegal memory access in custom kernel"),
        ],
        "planned": [
            _event("failure.detected", cluster, job2, "inc-maint", day - timedelta(hours=100),
                   trigger="planned", category="maintenance", node="gpu-node-010",
                   detail="firmware upgrade window"),
            _event("migration.started", cluster, job2, "inc-maint",
                   day - timedelta(hours=100) + 1 * s, mode="model_aware", state_source="self"),
            _event("migration.completed", cluster, job2, "inc-maint",
                   day - timedelta(hours=100) + 120 * s, steps_lost=0, duration_ms=118_000),
            _event("job.resumed", cluster, job2, "inc-maint",
                   day - timedelta(hours=100) + 126 * s, step=130455, downtime_ms=126_000),
        ],
    }  # fmt: skip


def _bulk_events(incident: Incident, cluster: Cluster, job: str) -> list[dict]:
    """The events an incident written in bulk follows from (SPEC 4.3 gives it its outcome)."""
    at, outcome = incident.detected_at, incident.outcome
    detected = {"trigger": incident.trigger, "category": incident.category}
    if incident.scope != "node":
        detected["scope"] = incident.scope
    events = [_event("failure.detected", cluster.name, job, incident.subject, at, **detected)]
    if incident.downtime_ms is None:
        return events
    resumed = at + timedelta(milliseconds=incident.downtime_ms)
    if outcome == "live_resolved":
        events.append(_event("migration.completed", cluster.name, job, incident.subject,
                             resumed - timedelta(seconds=5), steps_lost=0,
                             duration_ms=incident.downtime_ms - 5000))  # fmt: skip
    elif outcome == "rolled_back":
        events.append(_event("checkpoint.restored", cluster.name, job, incident.subject,
                             resumed - timedelta(seconds=5), steps_lost=420))  # fmt: skip
    events.append(_event("job.resumed", cluster.name, job, incident.subject, resumed, step=1,
                         downtime_ms=incident.downtime_ms))  # fmt: skip
    return events


def _bulk_incidents(contract: Contract, cluster: Cluster, count: int, now, rng) -> None:
    """`count` incidents spread over the contract's elapsed time, written in bulk with their
    events (stored as processed, so that no sweep folds them again)."""
    start = rules.year_bounds(contract.start, 1)[0]
    span = (now - timedelta(hours=1) - start).total_seconds()
    categories, weights = zip(*CATEGORY_WEIGHTS.items(), strict=True)
    jobs = [(name, f"/clusters/{cluster.name}/jobs/{name}", gpus) for name, gpus, _ in JOBS]
    rows, events = [], []
    for i in range(count):
        detected = start + timedelta(seconds=rng.random() * span)
        detected -= timedelta(microseconds=detected.microsecond % 1000)  # events carry ms
        number = rules.year_number(contract.start, contract.years, detected)
        job, source, gpus = rng.choice(jobs)
        roll = rng.random()
        # Year 1 misses its 90 % target; year 2 is on track.
        live_share = 0.86 if number == 1 else 0.945
        category = rng.choices(categories, weights)[0]
        trigger = "preemptive" if rng.random() < 0.22 else "unplanned"
        scope = "node"
        downtime = None
        if roll < 0.035:
            outcome, trigger, category = "planned", "planned", "maintenance"
            downtime = int(rng.uniform(90, 200) * 1000)
        elif category in contract.excluded_categories:
            outcome = "excluded"
        elif roll < 0.06:
            outcome, scope = "excluded", "network_wide"
        else:
            eligible_roll = rng.random()
            if eligible_roll < live_share:
                outcome = "live_resolved"
                downtime = int(min(rng.lognormvariate(5.0, 0.35), 840) * 1000)
            elif eligible_roll < live_share + (1 - live_share) * 0.7:
                outcome = "rolled_back"
                downtime = int(rng.uniform(12, 55) * 60_000)
            else:
                outcome = "failed"
        incident = Incident(
            cluster=cluster,
            subject=f"bulk-{i:07d}",
            source=source,
            contract=contract,
            year_number=number,
            detected_at=detected,
            deadline_at=detected + contract.deadline,
            trigger=trigger,
            category=category,
            scope=scope,
            computed_outcome=outcome,
            outcome=outcome,
            downtime_ms=downtime,
            gpus=gpus,
        )
        rows.append(incident)
        events.extend(_bulk_events(incident, cluster, job))
    Incident.objects.bulk_create(rows, batch_size=5000)
    Event.objects.bulk_create(
        (
            Event(
                cluster=cluster,
                source=event["source"],
                event_id=event["id"],
                type=event["type"],
                time=parse_time(event["time"]),
                subject=event["subject"],
                raw=event,
                content_hash=content_hash(canonical_json(event)),
                received_at=now,
                processed_at=now,
            )
            for event in events
        ),
        batch_size=5000,
    )


def seed_portal_demo(
    *,
    customer_name: str = "Acme AI",
    cluster_name: str = "east",
    incidents: int = 1500,
    now: datetime | None = None,
    password: str = "demo-password-1",
    usernames: tuple[str, str] = ("ada", "grace"),
    staff_username: str | None = "ops",
    showcase: bool = True,
    seed: int = 7,
) -> DemoData:
    """One customer, its contract, users and incidents; see the module docstring."""
    now = now or timezone.now()
    rng = random.Random(seed)
    start = _months_back(now.date(), 21)
    made = do_create_contract(
        customer_name=customer_name,
        start=start,
        years=3,
        annual_value=Decimal("1200000.00"),
        currency="USD",
        clusters=[cluster_name],
    )
    contract = made.contract
    cluster = Cluster.objects.get(name=cluster_name)
    customer = contract.customer
    staff = None
    if staff_username:
        staff = _user(staff_username, password, is_staff=True, is_superuser=True)
    owner = _user(usernames[0], password, first_name="Ada", email="ada@example.com")
    teammate = _user(usernames[1], password, first_name="Grace")
    for user in (owner, teammate):
        do_add_member(customer, user, actor=staff or _bot())

    for name, gpus, framework in JOBS:
        Job.objects.update_or_create(
            source=f"/clusters/{cluster_name}/jobs/{name}",
            defaults=dict(
                cluster=cluster, frameworks=[framework], world_size=gpus, gpus=gpus,
                model=name, mode="model_aware", started_at=now - timedelta(days=40),
            ),
        )  # fmt: skip

    # Each job ran from the contract's start until an hour ago: its GPU-hours for the spare
    # advisor (SPEC 4.9: job.started GPUs × first to last event).
    term_start = contract.contract_years.order_by("number").first().start
    runs = [
        _event(kind, cluster_name, name, None, at, **data)
        for name, gpus, framework in JOBS
        for kind, at, data in (
            ("job.started", term_start + timedelta(hours=1),
             {"framework": framework, "world_size": gpus, "gpus": gpus, "model": name,
              "mode": "model_aware"}),
            ("job.finished", now - timedelta(hours=1), {"status": "completed"}),
        )
    ]  # fmt: skip
    ingest_events(cluster, runs)
    fold(cluster, set(), {e["source"] for e in runs})

    with transaction.atomic():
        _bulk_incidents(contract, cluster, incidents, now, rng)

    data = DemoData(contract=contract, cluster=cluster, owner=owner, teammate=teammate, staff=staff)
    if showcase:
        stories = _showcase_events(cluster_name, now)
        events = [event for story in stories.values() for event in story]
        ingest_events(cluster, events)
        fold(
            cluster,
            {e["subject"] for e in events if "subject" in e},
            {e["source"] for e in events},
        )
        for outcome, story in stories.items():
            data.showcase[outcome] = Incident.objects.get(
                cluster=cluster, subject=story[0]["subject"]
            )
        if staff is not None:
            # The account team excluded one failure, with its reason.
            data.showcase["overridden"] = do_override_outcome(
                data.showcase["overridden"],
                outcome="excluded",
                actor=staff,
                reason="Facility power event at the customer's colocation site "
                "(ticket FAC-2291): outside the platform's scope.",
            )

    refresh_years((contract.pk, n) for n in range(1, contract.years + 1))
    for year in ContractYear.objects.filter(contract=contract).select_related("contract"):
        if now >= year.end + contract.grace:
            do_close_year(year, now=now)
    return data
