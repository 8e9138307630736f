from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from loans.models import ApiToken


class Command(BaseCommand):
    help = ("Issue an API token for a user and print it (shown once, stored hashed). An "
            "operator's token reads every tenant; a lead's only their own.")

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="what will use it (default: cli)")

    def handle(self, *args, username: str, name: str, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}.")
        if not name.strip() or len(name) > 100:
            raise CommandError("--name must be 1 to 100 characters.")
        _record, token = ApiToken.issue(user=user, name=name.strip())
        self.stderr.write(f"Token {name!r} for {username}; it is shown only now.")
        self.stdout.write(token)
