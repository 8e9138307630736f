"""Words that third-party apps show in the admin and ship no Simplified Chinese for
(django-axes: its models, fields and filters; a few of Django's newer admin texts). Marked here
so that makemessages puts them in the project's catalogue, whose translations win over the
apps' own (LOCALE_PATHS). The admin's JavaScript texts are in vendor_texts.js."""

from axes.apps import AppConfig as AxesAppConfig
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop


class AxesConfig(AxesAppConfig):
    """django-axes under a name an operator reads ("Axes" is its package's)."""

    verbose_name = _("Login security")


AXES = [
    gettext_noop("access attempt"), gettext_noop("access attempts"),
    gettext_noop("access failure"), gettext_noop("access failures"),
    gettext_noop("access log"), gettext_noop("access logs"),
    gettext_noop("access attempt expiration"), gettext_noop("access attempt expirations"),
    gettext_noop("User Agent"), gettext_noop("IP Address"), gettext_noop("Username"),
    gettext_noop("HTTP Accept"), gettext_noop("Path"), gettext_noop("Attempt Time"),
    gettext_noop("Access lock out"), gettext_noop("GET Data"), gettext_noop("POST Data"),
    gettext_noop("Failed Logins"), gettext_noop("Access Attempt"), gettext_noop("Expires At"),
    gettext_noop("The time when access attempt expires and is no longer valid."),
    gettext_noop("Logout Time"), gettext_noop("Session key hash (sha256)"),
    gettext_noop("Locked Out"), gettext_noop("Form Data"), gettext_noop("Meta Data"),
    gettext_noop("Clean up expired attempts"), gettext_noop("Not set"),
    gettext_noop("Attempt Remaining"),
]

DJANGO = [
    gettext_noop("After you’ve created a user, you’ll be able to edit more user options."),
    gettext_noop("Hold down “Control”, or “Command” on a Mac, to select more than one."),
]
