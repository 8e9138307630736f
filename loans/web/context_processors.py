from django.conf import settings
from django.http import HttpRequest

from loans.access import allowed, tenants_for

NAV_TENANTS = 8  # operators reach the rest from the fleet page


def site(request: HttpRequest) -> dict:
    """The header's tenant links (lazily: pages that do not render them run no query) and the
    site's time zone."""
    user = getattr(request, "user", None)

    def nav_tenants():
        if user is None or not user.is_authenticated:
            return []
        return list(tenants_for(user)[:NAV_TENANTS])

    return {"nav_tenants": nav_tenants, "TIME_ZONE": settings.TIME_ZONE,
            "is_operator": lambda: user is not None and allowed(user, "operator-pages")}
