import json

from django.core.management.base import BaseCommand, CommandError

from yoco.accounts.actions import do_create_billing_token
from yoco.lib.errors import ActionError


class Command(BaseCommand):
    help = (
        "Create a billing token, the only credential of the credit export "
        "(/api/v1/billing/credits). The last line printed is JSON "
        '{"billing_token": "..."}; the token is shown only this once.'
    )

    def add_arguments(self, parser):
        parser.add_argument("--name", default="billing", help="a label for the token (50 chars)")

    def handle(self, *args, **options):
        try:
            record, token = do_create_billing_token(name=options["name"], actor=None)
        except ActionError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Created billing token {record.prefix} ({record.name}); store it now, it is not "
            "shown again."
        )
        self.stdout.write(json.dumps({"billing_token": token}))
