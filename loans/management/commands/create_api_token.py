from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.utils import timezone

from core.audit import AuditedCommand
from loans.models import ApiToken
from loans.models.tokens import MAX_DAYS, Scope


class Command(AuditedCommand):
    help = ("Issue an API token for a user and print it (shown once, stored hashed). An "
            "operator's token reads every tenant; a lead's only their own. A read token is "
            "refused every write.")

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="what will use it (default: cli)")
        parser.add_argument("--scope", default=Scope.READ,
                            help="'read' (the default) or 'read write'")
        parser.add_argument("--days", type=int, default=None,
                            help=f"days until it expires, 1 to {MAX_DAYS} (default: "
                                 "API_TOKEN_DAYS, 90)")

    def handle(self, *args, username: str, name: str, scope: str, days: int | None,
               **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}.")
        if not name.strip() or len(name) > 100:
            raise CommandError("--name must be 1 to 100 characters.")
        if days is not None and not 1 <= days <= MAX_DAYS:
            raise CommandError(f"--days must be 1 to {MAX_DAYS}.")
        expires = timezone.now() + timedelta(days=days) if days is not None else None
        try:
            record, token = ApiToken.issue(user=user, name=name.strip(), scope=scope,
                                           expires_at=expires)
        except ValueError as error:
            raise CommandError(f"--scope: {error}.") from None
        self.stderr.write(f"Token {name!r} for {username}, scope {record.scope}, expires "
                          f"{record.expires_at:%Y-%m-%d %H:%M} UTC; it is shown only now.")
        self.stdout.write(token)
