import time

from django.core.management.base import BaseCommand

from yoco.notifications.delivery import deliver_due


class Command(BaseCommand):
    help = (
        "One attempt at every due notification (what the periodic task does where no "
        "scheduler runs); --loop keeps going until stopped."
    )

    def add_arguments(self, parser):
        parser.add_argument("--loop", action="store_true", help="run until stopped")
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between rounds")

    def handle(self, *args, loop=False, interval=1.0, **options):
        while True:
            claimed = deliver_due()
            self.stdout.write(f"Delivered or retried {claimed} notification(s).")
            if not loop:
                return
            time.sleep(interval)
