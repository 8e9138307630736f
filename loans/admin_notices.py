"""Notifications in the admin: the chat channels (added by Apprise URL, checked when saved, the
secret never shown again), the alert kinds operators make required, and the notices' outbox
(read only: what was told to whom, when, after how many tries)."""

from django import forms
from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from core.admin import ReadOnlyAdmin
from loans.models import Channel, Notice, RequiredAlert
from loans.services.alerts import channels


class ChannelForm(forms.ModelForm):
    new_url = forms.CharField(
        label=_("Apprise URL"), required=False, max_length=channels.MAX_URL,
        help_text=_("slack://, workflows:// (Microsoft Teams), feishu://, lark://, dingtalk://, "
                    "wecombot://, discord:// or tgram://. Kept secret: leave empty to keep the "
                    "current one."))

    class Meta:
        model = Channel
        fields = ["tenant", "name", "language"]

    def clean_new_url(self):
        url = self.cleaned_data.get("new_url", "").strip()
        if not url:
            if not self.instance.pk:
                raise forms.ValidationError(_("Give the channel's Apprise URL."))
            return ""
        try:
            self.parsed = channels.parse(url)
        except channels.ChannelError as error:
            raise forms.ValidationError(str(error)) from None
        return url

    def save(self, commit=True):
        channel = super().save(commit=False)
        parsed = getattr(self, "parsed", None)
        if parsed is not None:
            channel.url, channel.service, channel.shown = parsed.url, parsed.service, parsed.shown
            channel.failing_since, channel.last_error = None, ""
        if commit:
            channel.save()
        return channel


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    form = ChannelForm
    list_display = ["name", "tenant", "service", "shown", "language", "failing_since"]
    list_filter = ["service", "language", "tenant"]
    search_fields = ["name", "tenant__slug", "tenant__name"]
    readonly_fields = ["service", "shown", "failing_since", "last_error", "created_by",
                       "created_at"]
    list_select_related = ["tenant"]

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


@admin.register(RequiredAlert)
class RequiredAlertAdmin(admin.ModelAdmin):
    list_display = ["kind"]


@admin.register(Notice)
class NoticeAdmin(ReadOnlyAdmin):
    list_display = ["key", "kind", "user", "channel", "timing", "created_at", "attempts",
                    "sent_at", "last_error"]
    list_filter = ["kind", "timing", ("sent_at", admin.EmptyFieldListFilter)]
    search_fields = ["key", "user__username", "user__email"]
    list_select_related = ["user", "channel"]
    date_hierarchy = "created_at"
