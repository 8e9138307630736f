"""A person's API tokens on a page (/tokens/): each with its scope, last use and expiry,
revoked with a button; a new one issued with a name, a scope and its days, shown once.
Operators see and revoke everyone's (loans.access.api_tokens_for)."""

from datetime import timedelta

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from loans.access import api_tokens_for
from loans.models import ApiToken
from loans.models.tokens import MAX_DAYS


class TokenForm(forms.Form):
    name = forms.CharField(label=gettext_lazy("Name"), max_length=100, help_text=gettext_lazy(
        "What will use it, e.g. Grafana."))
    scope = forms.ChoiceField(label=gettext_lazy("Scope"), choices=ApiToken.Scope.choices,
                              initial=ApiToken.Scope.READ, help_text=gettext_lazy(
                                  "read: every read you may make, and no write."))
    days = forms.IntegerField(label=gettext_lazy("Expires in (days)"), min_value=1,
                              max_value=MAX_DAYS, initial=90)


@login_required
def tokens_page(request: HttpRequest) -> HttpResponse:
    form, issued = TokenForm(), None
    if request.method == "POST":
        form = TokenForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            _record, issued = ApiToken.issue(
                user=request.user, name=data["name"].strip(), scope=data["scope"],
                expires_at=timezone.now() + timedelta(days=data["days"]))
            form = TokenForm()
    tokens = list(api_tokens_for(request.user))
    return render(request, "loans/tokens.html", {
        "form": form, "issued": issued, "tokens": tokens, "now": timezone.now(),
        "everyone": any(t.user_id != request.user.pk for t in tokens),
    }, status=400 if form.errors else 200)


@login_required
@require_POST
def revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """Deletes the token: refused from the next request on. Another's token is not found."""
    token = get_object_or_404(api_tokens_for(request.user), pk=pk)
    token.delete()
    messages.success(request, _("Token %(name)s of %(user)s revoked.")
                     % {"name": token.name, "user": token.user.get_username()})
    return redirect("api-tokens")
