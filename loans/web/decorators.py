"""What a page asks before it answers: operators only (loans.access says who is one)."""

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from loans.access import allowed


def operator_required(view):
    """Operators only: anonymous users are sent to log in, everyone else is refused."""

    @wraps(view)
    def check(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not allowed(request.user, "operator-pages"):
            return render(request, "403.html", status=403)
        return view(request, *args, **kwargs)

    return check
