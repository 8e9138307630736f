"""The application's settings plus the DRF baseline endpoint that bench/ingest.py compares with."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
