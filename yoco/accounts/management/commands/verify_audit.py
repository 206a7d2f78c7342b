from django.core.management.base import BaseCommand, CommandError

from yoco.accounts import chain
from yoco.accounts.models import AuditRecord


class Command(BaseCommand):
    help = (
        "Walk the audit trail's hash chain in id order and name the first record that was "
        "changed, removed or inserted behind the platform's back (exit status 1), or confirm "
        "that the chain is whole."
    )

    def handle(self, *args, **options):
        records = AuditRecord.objects.order_by("pk")
        broken = chain.first_break(records.iterator(chunk_size=2000))
        if broken is not None:
            raise CommandError(f"audit record {broken.pk} breaks the chain: {broken.problem}")
        self.stdout.write(f"audit chain whole: {records.count()} records")
