from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for the proxy and the demo script: the process answers and the database too."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:  # any database failure is the same answer to a health check
        return JsonResponse({"status": "database unavailable"}, status=503)
    return JsonResponse({"status": "ok"})


def home(request: HttpRequest) -> HttpResponse:
    return redirect("admin:index")
