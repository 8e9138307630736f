"""The disk spool: every batch is written here before it is sent and removed only after the
server accepted it, so a crash, a reboot, a network cut or a server outage loses nothing.

Bounded in size and in age: when full, the oldest batches go first, and batches older than
the server's back-fill horizon (which would be refused) are given up; the samples they held
are counted (kept across restarts) and reported to the server as `dropped_samples`.
"""

import json
import os
import threading
import time
from pathlib import Path

STATE = "state.json"


class Spool:
    def __init__(self, folder: Path, max_bytes: int = 100 * 1024 * 1024,
                 max_age_s: float = 7 * 86400):
        self.folder, self.max_bytes, self.max_age_s = Path(folder), max_bytes, max_age_s
        self.folder.mkdir(parents=True, exist_ok=True)
        for partial in self.folder.glob("*.tmp"):  # a write cut short by a crash
            partial.unlink(missing_ok=True)
        self._sequence = 0
        self._lock = threading.Lock()  # the poller writes while the sender reads and removes
        state = self.folder / STATE
        self.dropped = json.loads(state.read_text()).get("dropped", 0) if state.exists() else 0

    def put(self, samples: list[dict]) -> Path:
        """Write a batch durably (temporary file, fsync, rename) and make room if needed."""
        data = json.dumps(samples, separators=(",", ":")).encode()
        with self._lock:
            self._sequence += 1
            path = self.folder / f"{time.time_ns():020d}-{self._sequence:06d}.json"
            self._write(path, data)
            self._trim()
        return path

    def count_dropped(self, samples: int) -> None:
        """Samples given up on elsewhere (a batch the server could not read)."""
        with self._lock:
            self.dropped += samples
            self._save()

    def pending(self) -> list[Path]:
        """Batches not yet accepted, oldest first."""
        return sorted(p for p in self.folder.glob("*.json") if p.name != STATE)

    def load(self, path: Path) -> list[dict] | None:
        """The batch, or None if it was dropped to make room meanwhile."""
        try:
            return json.loads(path.read_bytes())
        except FileNotFoundError:
            return None

    def remove(self, path: Path) -> None:
        with self._lock:
            path.unlink(missing_ok=True)

    def size(self) -> int:
        return sum(p.stat().st_size for p in self.pending())

    def _trim(self) -> None:
        batches = self.pending()
        total = sum(p.stat().st_size for p in batches)
        expired = time.time_ns() - int(self.max_age_s * 1e9)
        while batches and (total > self.max_bytes or _written_ns(batches[0]) < expired):
            oldest = batches.pop(0)
            total -= oldest.stat().st_size
            self.dropped += len(self.load(oldest) or [])
            oldest.unlink()
        self._save()

    def _save(self) -> None:
        self._write(self.folder / STATE, json.dumps({"dropped": self.dropped}).encode())

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        partial = path.with_suffix(".tmp")
        with open(partial, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, path)


def _written_ns(batch: Path) -> int:
    """When the batch was written: its name begins with the time in nanoseconds."""
    return int(batch.name.split("-", 1)[0])
