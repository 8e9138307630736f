from django.core.management.base import CommandError
from django.utils import timezone

from core.audit import AuditedCommand
from loans.demo import DAYS, seed


class Command(AuditedCommand):
    help = (
        f"Create the demo: tenants with leads, a plan catalogue, active contracts, nodes with GPUs "
        f"and {DAYS} days of hourly usage. Safe to run again: it adds only the hours since."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--days", type=int, default=DAYS, help=f"days of usage history (default {DAYS})"
        )

    def handle(self, *args, days: int, **options):
        if not 1 <= days <= 400:
            raise CommandError("--days must be between 1 and 400.")
        logins = seed(
            now=timezone.now(), days=days, log=lambda line: self.stdout.write(f"  {line}")
        )
        self.stdout.write(self.style.SUCCESS("Demo ready. Logins:"))
        user_width = max(len(user) for user, _password, _role in logins)
        password_width = max(len(password) for _user, password, _role in logins)
        for user, password, role in logins:
            user, password = user.ljust(user_width), password.ljust(password_width)
            self.stdout.write(f"  {user}  {password}  {role}")
