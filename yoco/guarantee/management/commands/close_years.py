from datetime import UTC, datetime

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from yoco.guarantee import rules
from yoco.guarantee.actions import do_close_due_years
from yoco.guarantee.actions.years import due_years, open_disputes
from yoco.guarantee.years import year_result


def parse_now(raw: str) -> datetime:
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise CommandError(f"--now must be an ISO 8601 time, got {raw!r}") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Command(BaseCommand):
    help = (
        "Close every open contract year whose end plus grace period has passed, earning the "
        "credit of each year that misses the guarantee. Running it again changes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--now", help="evaluate as of this ISO time (UTC when it has no offset)"
        )

    def handle(self, *args, **options):
        now = parse_now(options["now"]) if options["now"] else timezone.now()
        closed = do_close_due_years(now)
        for year in due_years(now):
            if waiting := open_disputes(year):
                self.stdout.write(
                    f"Waiting: contract {year.contract_id} year {year.number} is due but has "
                    f"{waiting} open dispute{'s' if waiting != 1 else ''}; it closes once "
                    "they are answered."
                )
        if not closed:
            self.stdout.write("No contract year is due for closing.")
        for year in closed:
            result = year_result(year)
            credit = year.credits.exclude(state="voided").first()
            verdict = "meets" if result["meets"] else "MISSES"
            line = (
                f"Closed contract {year.contract_id} year {year.number} "
                f"({year.start:%Y-%m-%d} – {year.end:%Y-%m-%d}): {verdict} the guarantee, "
                f"{result['counts']['live_resolved']}/{result['eligible']} live"
            )
            if credit:
                amount = rules.format_amount(credit.amount, credit.currency)
                line += f"; credit {credit.pk} earned: {amount} {credit.currency}"
            self.stdout.write(line)
