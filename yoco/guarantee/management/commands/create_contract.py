import json
from datetime import date
from decimal import Decimal, InvalidOperation

from django.core.management.base import BaseCommand, CommandError

from yoco.guarantee import rules
from yoco.guarantee.actions import ActionError, do_create_contract


def _decimal(name: str, raw: str) -> Decimal:
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise CommandError(f"{name} must be a decimal number, got {raw!r}") from None
    if not value.is_finite():
        raise CommandError(f"{name} must be a finite number, got {raw!r}")
    return value


class Command(BaseCommand):
    help = (
        "Create a contract for a customer (reused if it exists) over named clusters. The last "
        "line printed is JSON with the contract and customer ids, one ingest key per cluster and "
        "a customer read token; keys are shown only this once."
    )

    def add_arguments(self, parser):
        parser.add_argument("--customer", required=True, help="customer name (reused if known)")
        parser.add_argument("--start", required=True, help="first day, YYYY-MM-DD (00:00 UTC)")
        parser.add_argument("--years", required=True, type=int, help="term in years")
        parser.add_argument("--annual-value", required=True, help="decimal, in --currency")
        parser.add_argument("--currency", required=True, help="ISO 4217 code, e.g. USD")
        parser.add_argument(
            "--cluster", action="append", required=True, help="cluster name; repeat for more"
        )
        parser.add_argument(
            "--target",
            default=str(rules.DEFAULT_TARGET),
            help="percent live-resolved (default %(default)s)",
        )
        parser.add_argument(
            "--credit-rate",
            default=str(rules.DEFAULT_CREDIT_RATE),
            help="percent credited (default %(default)s)",
        )
        parser.add_argument("--deadline-minutes", type=int, default=rules.DEFAULT_DEADLINE_MINUTES)
        parser.add_argument("--grace-days", type=int, default=rules.DEFAULT_GRACE_DAYS)
        parser.add_argument(
            "--exclude-category",
            action="append",
            help="excluded failure category; repeat; replaces the default software_user, sdc",
        )
        parser.add_argument(
            "--framework",
            action="append",
            help="supported framework; repeat; replaces the default four",
        )

    def handle(self, *args, **options):
        try:
            start = date.fromisoformat(options["start"])
        except ValueError:
            raise CommandError(f"--start must be YYYY-MM-DD, got {options['start']!r}") from None
        try:
            created = do_create_contract(
                customer_name=options["customer"],
                start=start,
                years=options["years"],
                annual_value=_decimal("--annual-value", options["annual_value"]),
                currency=options["currency"],
                clusters=options["cluster"],
                target=_decimal("--target", options["target"]),
                credit_rate=_decimal("--credit-rate", options["credit_rate"]),
                deadline_minutes=options["deadline_minutes"],
                grace_days=options["grace_days"],
                excluded_categories=options["exclude_category"],
                frameworks=options["framework"],
            )
        except ActionError as exc:
            raise CommandError(str(exc)) from None
        contract = created.contract
        self.stdout.write(
            f"Created contract {contract.pk} for {contract.customer.name}: {contract.years} "
            f"year(s) from {contract.start}, clusters {', '.join(created.cluster_keys)}."
        )
        self.stdout.write(
            json.dumps(
                {
                    "contract": contract.pk,
                    "customer": contract.customer_id,
                    "cluster_keys": created.cluster_keys,
                    "read_token": created.read_token,
                }
            )
        )
