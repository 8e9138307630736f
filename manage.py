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
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
