"""Plotly's JavaScript, served by the application from the plotly package (no CDN): the page
asks for static "vendor/plotly.min.js" and this finder hands over the package's own file, so the
bundle's version is the one pyproject pins."""

from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PACKAGE_DATA = Path(plotly.__file__).parent / "package_data"
FILES = {"vendor/plotly.min.js": "plotly.min.js"}


class PlotlyFinder(BaseFinder):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=PACKAGE_DATA)
        self.storage.prefix = "vendor"

    def check(self, **kwargs) -> list:
        return []

    def find(self, path: str, find_all: bool = False, **kwargs):
        name = FILES.get(path)
        if name is None:
            return [] if find_all else None
        found = str(PACKAGE_DATA / name)
        return [found] if find_all else found

    def list(self, ignore_patterns):
        for name in FILES.values():
            yield name, self.storage


def require_collected() -> None:
    """Outside DEBUG the pages name hashed static files from the manifest collectstatic
    writes; without it every page would answer 500. Called where the web process starts."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    backend = settings.STORAGES["staticfiles"]["BACKEND"]
    if "Manifest" not in backend:
        return
    manifest = Path(settings.STATIC_ROOT) / "staticfiles.json"
    if not manifest.is_file():
        raise ImproperlyConfigured(
            f"No collected static files in {settings.STATIC_ROOT} (STATIC_ROOT): run "
            "`python manage.py collectstatic --no-input` before starting the web server.")
