#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        settings.INSTALLED_APPS  # noqa: B018 - reads the settings, which check themselves
    except ImproperlyConfigured as error:
        # A setting missing or wrong: one line naming it, not Django's traceback.
        sys.exit(f"gpuloans: {error}")
    from core.audit import acting

    # Django's own commands too (createsuperuser, changepassword, shell): their writes are the
    # command's in the audit log. A server run from here serves each request as its person.
    name = sys.argv[1] if len(sys.argv) > 1 else "help"
    with acting(job=f"command {name}"):
        execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
