"""Plotly's JavaScript, served by the application from the plotly package (no CDN): the page
asks for static "vendor/plotly.min.js" and this finder hands over the package's own file, so the
bundle's version is the one pyproject pins."""

from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage
from whitenoise.storage import CompressedManifestStaticFilesStorage

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
    from django.contrib.staticfiles.storage import ManifestFilesMixin
    from django.core.exceptions import ImproperlyConfigured
    from django.utils.module_loading import import_string

    if not issubclass(import_string(settings.STORAGES["staticfiles"]["BACKEND"]),
                      ManifestFilesMixin):
        return
    manifest = Path(settings.STATIC_ROOT) / "staticfiles.json"
    if not manifest.is_file():
        raise ImproperlyConfigured(
            f"No collected static files in {settings.STATIC_ROOT} (STATIC_ROOT): run "
            "`python manage.py collectstatic --no-input` before starting the web server.")


class CompressedServedStorage(CompressedManifestStaticFilesStorage):
    """WhiteNoise's compressing manifest storage, compressing once what the pages serve.

    collectstatic compressed every file twice over (the original name and the hashed one,
    gzip and Brotli each): source maps, licences and the unhashed copies no page names, most
    of a fresh `make demo`'s time. The pages name hashed files only (the manifest), and source
    maps are fetched by a browser's developer tools alone, so those are compressed and the
    rest is served as it is."""

    SKIPPED = (".map", ".md", ".ts", ".scss", ".less")

    def compress_files(self, paths):
        served = set(self.hashed_files.values())
        return super().compress_files(
            [p for p in paths if p in served and not p.endswith(self.SKIPPED)
             and "LICENSE" not in p])
