"""Error answers: JSON under /api/ (what an integration parses), the site's pages elsewhere."""

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults


def _api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _api(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if _api(request):
        return JsonResponse({"detail": "Server error; it has been logged."}, status=500)
    return defaults.server_error(request)
