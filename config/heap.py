"""How a web worker keeps its garbage collector cheap. config/wsgi.py settles the heap once the
application is loaded; bench/dashboard.py does the same, so that it times the pages as the
workers serve them."""

import gc


def settle() -> None:
    """A web worker's heap is mostly what it loaded at start (Django, the apps, their modules),
    and it lives as long as the worker. Freezing it keeps the garbage collector from rescanning
    it, and collecting the youngest objects every 10,000 allocations instead of every 700 lets
    most of a request's objects die first: the collector's share of an ingested batch fell from
    about 0.65 ms to 0.03 ms (bench/ingest.py's batches, in process), and the fleet page's p95
    at 1,001 contracts from about 290 ms to 255 ms (bench/dashboard.py)."""
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
