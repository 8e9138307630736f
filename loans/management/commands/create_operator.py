import getpass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from core.audit import AuditedCommand
from loans.access import OPERATORS


class Command(AuditedCommand):
    help = ("Make a user an operator: staff, in the operators group (every permission of the "
            "product's models). Creates the user if missing and asks for a password, unless "
            "--no-password (set one later with changepassword).")

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--email", default="")
        parser.add_argument("--no-password", action="store_true",
                            help="create the user without a usable password")

    def handle(self, *args, username: str, email: str, no_password: bool, **options):
        group = Group.objects.filter(name=OPERATORS).first()
        if group is None:
            raise CommandError("No operators group yet: run `python manage.py migrate` first.")
        users = get_user_model()
        user = users.objects.filter(username=username).first()
        created = user is None
        if created:
            user = users(username=username, email=email)
            try:
                user.full_clean(exclude=["password"])
            except ValidationError as error:
                raise CommandError("; ".join(error.messages)) from None
            if no_password:
                user.set_unusable_password()
            else:
                user.set_password(self._ask_password(user))
        user.is_staff = True
        user.save()
        user.groups.add(group)
        self.stdout.write(f"{'Created' if created else 'Updated'} operator {username}.")

    def _ask_password(self, user) -> str:
        first = getpass.getpass("Password: ")
        if first != getpass.getpass("Password (again): "):
            raise CommandError("The passwords differ.")
        try:
            validate_password(first, user)
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from None
        return first
