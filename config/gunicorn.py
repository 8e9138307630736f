"""gunicorn settings for production: `gunicorn config.wsgi --config config/gunicorn.py`.

With PROMETHEUS_MULTIPROC_DIR set (a directory the workers and the Celery worker share),
/metrics adds up the counts of every worker. When gunicorn starts it removes the files of
processes that are gone (a Celery worker still running keeps its counts), and a worker that
exits is marked dead so its live gauges stop counting.
"""

import os
from pathlib import Path

workers = int(os.environ.get("WEB_CONCURRENCY", "4"))
bind = os.environ.get("BIND", "127.0.0.1:8000")
timeout = 60
graceful_timeout = 30


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def on_starting(server) -> None:
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        for path in Path(folder).glob("*.db"):  # named like counter_1234.db
            pid = path.stem.rsplit("_", 1)[-1]
            if not pid.isdigit() or not _alive(int(pid)):
                path.unlink(missing_ok=True)


def child_exit(server, worker) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
