"""The agent's loop: poll every `poll_s`, aggregate per `interval_s`, spool completed intervals,
and send the spool oldest first from a thread of its own, backing off while the server is away."""

import logging
import threading
import time
from datetime import UTC, datetime

from agent.aggregate import Aggregator
from agent.client import Backoff, Client
from agent.holders import Holders
from agent.readings import CollectorError
from agent.spool import Spool

log = logging.getLogger("gpuloans-agent")


class Agent:
    def __init__(self, collector, spool: Spool, client: Client, *, poll_s: float = 5.0,
                 interval_s: int = 60, holders: Holders | None = None):
        self.collector, self.spool, self.client = collector, spool, client
        self.holders = holders  # None: the collector's processes say who holds a GPU
        self.poll_s = poll_s
        self.aggregator = Aggregator(interval_s)
        self.stopping = threading.Event()
        self.backoff = Backoff()

    def run(self) -> None:
        sender = threading.Thread(target=self.send_loop, name="sender", daemon=True)
        sender.start()
        try:
            while not self.stopping.is_set():
                self.poll_once()
                self.stopping.wait(self.poll_s - time.monotonic() % self.poll_s)
        finally:
            self.stopping.set()
            sender.join(timeout=10)

    def poll_once(self, now: datetime | None = None) -> None:
        now = now or datetime.now(UTC)
        try:
            readings = self.collector.poll()
        except CollectorError as error:
            log.error("%s", error)
            readings = []
        for reading in readings:
            if reading.error:
                log.error("%s", reading.error)
        if self.holders is not None:
            readings = self.holders.apply(readings)
        self.aggregator.add(readings, now)
        done = self.aggregator.completed(now)
        if done:
            self.spool.put(done)

    def send_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                wait = self.drain()
            except Exception:  # the sender must outlive any one bad moment; the spool keeps all
                log.exception("sending failed unexpectedly; retrying")
                wait = self.backoff.failure()
            self.stopping.wait(wait if wait else 1.0)

    def drain(self) -> float:
        """Send pending batches, oldest first; the seconds to wait when one could not go."""
        for path in self.spool.pending():
            samples = self.spool.load(path)
            if samples is None:
                continue
            outcome = self.client.send(samples, self.spool.dropped)
            if outcome.split and len(samples) > 1:
                half = len(samples) // 2
                self.spool.put(samples[:half])
                self.spool.put(samples[half:])
                self.spool.remove(path)
                continue
            if not outcome.done:
                delay = self.backoff.failure(outcome.retry_after)
                log.warning("%s; retrying in %.0f s (%d batches spooled)", outcome.message,
                            delay, len(self.spool.pending()))
                return delay
            self.backoff.success()
            if outcome.lost:
                self.spool.count_dropped(outcome.lost)
            self.spool.remove(path)
            log.info("sent %d samples: %s", len(samples), outcome.message)
        return 0.0
