"""What a shared cache may keep: nothing that a logged-in user or a token was shown. A tenant's
page, its CSV exports and the API's answers are private to the caller, so a response to an
authenticated request that set no Cache-Control of its own is marked `private, no-store`
(a proxy or the browser's disk cache keeps no copy). Static files and the login page are
unaffected."""

from django.utils.cache import patch_cache_control


class PrivateByDefault:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        user = getattr(request, "user", None)
        authenticated = (user is not None and user.is_authenticated) or (
            "Authorization" in request.headers)
        if authenticated and not response.has_header("Cache-Control"):
            patch_cache_control(response, private=True, no_store=True)
        return response
