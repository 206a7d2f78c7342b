import json
from collections import defaultdict
from datetime import date
from decimal import Decimal
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from yoco.accounts.actions import do_add_portal_user
from yoco.accounts.models import Cluster, Customer
from yoco.events.ingest import ingest_events
from yoco.guarantee.actions import do_close_due_years, do_create_contract
from yoco.guarantee.fold import fold

DEFAULT_FIXTURE = Path(settings.BASE_DIR) / "fixtures" / "demo.json"
CHUNK = 1000


class Command(BaseCommand):
    help = (
        "Load the demo customer, its contracts, its portal user and its event history "
        "(fixtures/demo.json, made by fixtures/generate_demo.py) through the ingest path, "
        "then close the years that are due."
    )

    def add_arguments(self, parser):
        parser.add_argument("--fixture", default=str(DEFAULT_FIXTURE))

    def handle(self, *args, **options):
        path = Path(options["fixture"])
        if not path.exists():
            raise CommandError(f"{path} does not exist; run fixtures/generate_demo.py")
        doc = json.loads(path.read_text())
        if Customer.objects.filter(name=doc["customer"]).exists():
            self.stdout.write(f"{doc['customer']} is loaded already; nothing to do.")
            return
        for spec in doc["contracts"]:
            created = do_create_contract(
                customer_name=doc["customer"],
                start=date.fromisoformat(spec["start"]),
                years=spec["years"],
                annual_value=Decimal(spec["annual_value"]),
                currency=spec["currency"],
                clusters=spec["clusters"],
                target=Decimal(spec["target"]),
                credit_rate=Decimal(spec["credit_rate"]),
                deadline_minutes=spec["deadline_minutes"],
                grace_days=spec["grace_days"],
            )
            self.stdout.write(f"contract {created.contract.pk}: {', '.join(spec['clusters'])}")
        customer = Customer.objects.get(name=doc["customer"])
        for user in doc["users"]:
            do_add_portal_user(customer, username=user["username"], password=user["password"],
                               email=user.get("email", ""))  # fmt: skip

        by_cluster = defaultdict(list)
        for event in doc["events"]:
            by_cluster[event["source"].split("/")[2]].append(event)
        for name, events in by_cluster.items():
            cluster = Cluster.objects.get(name=name)
            stored = 0
            for start in range(0, len(events), CHUNK):
                result = ingest_events(cluster, events[start : start + CHUNK])
                stored += sum(r["status"] == "accepted" for r in result.results)
            # One fold over the whole cluster (the per-request folds ran on commit already
            # when Celery is eager; this makes the load complete with a real broker too).
            subjects = {e["subject"] for e in events if e.get("subject")}
            fold(cluster, subjects, {e["source"] for e in events})
            self.stdout.write(f"{name}: {stored} events stored")
        for year in do_close_due_years():
            self.stdout.write(f"closed contract {year.contract_id} year {year.number}")
