"""Static files: the check that they were collected, and the storage that compresses what the
pages serve. Plotly's JavaScript is static/vendor/plotly-cartesian.min.js, plotly.js's own
partial bundle of the cartesian trace types (scatter, bar, heatmap and their kin: every chart
the pages draw), 1.5 MB where the whole library is 4.8; tests/test_static.py holds it to the
plotly.js version the plotly package builds figures for."""

from pathlib import Path

from whitenoise.storage import CompressedManifestStaticFilesStorage


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
