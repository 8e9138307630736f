"""gunicorn settings for production: `gunicorn config.wsgi --config config/gunicorn.py`.

With PROMETHEUS_MULTIPROC_DIR set (an empty directory the workers and the Celery worker share),
/metrics adds up the counts of every worker: the directory is emptied when gunicorn starts,
and a worker that exits is marked dead so its live gauges stop counting.
"""

import os
from pathlib import Path

workers = int(os.environ.get("WEB_CONCURRENCY", "4"))
bind = os.environ.get("BIND", "127.0.0.1:8000")
timeout = 60
graceful_timeout = 30


def on_starting(server) -> None:
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        for stale in Path(folder).glob("*.db"):
            stale.unlink()


def child_exit(server, worker) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
