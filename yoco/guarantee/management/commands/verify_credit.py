from django.core.management.base import BaseCommand, CommandError

from yoco.guarantee import rules
from yoco.guarantee.evidence import EvidenceError, verify_credit
from yoco.guarantee.models import Credit
from yoco.lib.vocabulary import OUTCOMES


class Command(BaseCommand):
    help = (
        "Re-derive a credit's contract year from its evidence snapshot (the events, overrides "
        "and dispute decisions it names) with the rules version it names, and show agreement "
        "or every difference (exit status 1); exit status 2 when it cannot be re-derived."
    )

    def add_arguments(self, parser):
        parser.add_argument("credit", type=int, help="the credit's id")

    def handle(self, *args, **options):
        try:
            credit = Credit.objects.select_related("contract_year").get(pk=options["credit"])
        except Credit.DoesNotExist:
            raise CommandError(f"no credit {options['credit']}", returncode=2) from None
        try:
            result = verify_credit(credit)
        except (rules.UnknownRulesVersion, EvidenceError) as exc:
            raise CommandError(f"credit {credit.pk}: {exc}", returncode=2) from None
        year = credit.contract_year
        derived = result.derived
        self.stdout.write(
            f"credit {credit.pk}: contract {year.contract_id} year {year.number} re-derived with "
            f"rules version {result.rules_version} from {len(derived.outcomes)} incidents"
        )
        self.stdout.write(
            "  "
            + ", ".join(f"{outcome} {derived.counts[outcome]}" for outcome in OUTCOMES)
            + f"; eligible {derived.eligible}; {'meets' if derived.meets else 'misses'} the target"
        )
        self.stdout.write(f"  evidence sha256 {result.evidence_hash}")
        if not result.agrees:
            for difference in result.differences:
                self.stdout.write(f"  DIFFERS: {difference}")
            raise CommandError(
                f"credit {credit.pk}: the re-derived year differs from its snapshot in "
                f"{len(result.differences)} place{'s' if len(result.differences) > 1 else ''}"
            )
        self.stdout.write("  agrees: the snapshot is what its inputs give")
