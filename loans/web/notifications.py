"""A person's notifications (/notifications/): the language their messages are written in and,
per alert kind, when they are told (at once, in the daily or weekly digest, or not at all;
a kind operators made required cannot be turned off), the weekly digest and statements by
e-mail; and the chat channels of the tenants they lead (the operators' own too, for
operators), added by Apprise URL, shown with their secrets masked, removed with a button."""

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from loans.access import allowed, channels_for, tenants_led_by
from loans.models import Alert, Channel, NoticeProfile
from loans.models.notices import DIGEST, STATEMENT
from loans.services.alerts import channels, notices

FLEET = "-"  # the tenant field's value for the operators' own channel


def kinds() -> list[tuple[str, str]]:
    return [(DIGEST, _("The weekly digest")), (STATEMENT, _("Closed statements, as PDF")),
            *((k, str(label).capitalize()) for k, label in Alert.Kind.choices)]


class ChoicesForm(forms.Form):
    language = forms.ChoiceField(label=gettext_lazy("Language of your messages"),
                                 choices=settings.LANGUAGES)

    def __init__(self, *args, required: set[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.required = required
        for kind, label in kinds():
            help_text = _("Required by the operators: it cannot be turned off.") \
                if kind in required else ""
            self.fields[f"when_{kind}"] = forms.ChoiceField(
                label=label, choices=notices.choices_for(kind, required), help_text=help_text)


class ChannelForm(forms.Form):
    tenant = forms.ChoiceField(label=gettext_lazy("For"))
    name = forms.CharField(label=gettext_lazy("Name"), max_length=100, help_text=gettext_lazy(
        "What people call it, e.g. #gpu-team."))
    url = forms.CharField(label=gettext_lazy("Apprise URL"), max_length=channels.MAX_URL,
                          widget=forms.TextInput(attrs={"autocomplete": "off"}),
                          help_text=gettext_lazy(
                              "slack://, workflows:// (Microsoft Teams), feishu://, lark://, "
                              "dingtalk://, wecombot://, discord:// or tgram://; its secret is "
                              "never shown again."))
    language = forms.ChoiceField(label=gettext_lazy("Language"), choices=settings.LANGUAGES)

    def __init__(self, *args, owners: list[tuple[str, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tenant"].choices = owners

    def clean_url(self):
        try:
            self.parsed = channels.parse(self.cleaned_data["url"])
        except channels.ChannelError as error:
            raise forms.ValidationError(str(error)) from None
        return self.parsed.url


def _owners(user) -> list[tuple[str, str]]:
    owners = [(t.slug, t.name) for t in tenants_led_by(user).order_by("name")]
    if allowed(user, "manage-channels", None):
        owners.insert(0, (FLEET, _("The operators (alerts no tenant owns)")))
    return owners


@login_required
def page(request: HttpRequest) -> HttpResponse:
    user = request.user
    required = notices.required_kinds()
    profile = notices.profile_of(user)
    initial = {"language": notices.language_of(profile)}
    initial.update({f"when_{k}": notices.timing(profile, k, required) for k, _l in kinds()})
    owners = _owners(user)
    choices_form = ChoicesForm(initial=initial, required=required)
    channel_form = ChannelForm(owners=owners, initial={"language": initial["language"]})
    status = 200
    if request.method == "POST" and request.POST.get("action") == "choices":
        choices_form = ChoicesForm(request.POST, required=required)
        if choices_form.is_valid():
            data = choices_form.cleaned_data
            NoticeProfile.objects.update_or_create(user=user, defaults={
                "language": data["language"],
                "timings": {k: data[f"when_{k}"] for k, _l in kinds()}})
            messages.success(request, _("Your choices are saved."))
            return redirect("notifications")
        status = 400
    elif request.method == "POST" and request.POST.get("action") == "channel":
        channel_form = ChannelForm(request.POST, owners=owners)
        if channel_form.is_valid():
            data = channel_form.cleaned_data
            tenant = None if data["tenant"] == FLEET else \
                tenants_led_by(user).get(slug=data["tenant"])
            parsed = channel_form.parsed
            Channel.objects.create(tenant=tenant, name=data["name"].strip(), url=parsed.url,
                                   service=parsed.service, shown=parsed.shown,
                                   language=data["language"], created_by=user)
            messages.success(request, _("Channel %(name)s added: it hears every alert of "
                                        "%(owner)s at once.") % {
                "name": data["name"].strip(),
                "owner": tenant.name if tenant else _("the operators")})
            return redirect("notifications")
        status = 400
    elif request.method == "POST":
        messages.error(request, _("Unknown action; nothing was changed."))
        status = 400
    return render(request, "loans/notifications.html", {
        "choices_form": choices_form, "channel_form": channel_form if owners else None,
        "channels": list(channels_for(user).select_related("tenant")),
        "fleet": FLEET,
    }, status=status)


@login_required
@require_POST
def remove_channel(request: HttpRequest, pk: int) -> HttpResponse:
    """Deletes the channel: it hears nothing more. Another's channel is not found."""
    channel = get_object_or_404(channels_for(request.user), pk=pk)
    channel.delete()
    messages.success(request, _("Channel %(name)s removed.") % {"name": channel.name})
    return redirect("notifications")
