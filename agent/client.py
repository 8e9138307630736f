"""Posting batches to gpuloans (agent protocol v1) and saying what to do with the answer."""

import http.client
import json
import logging
import random
import urllib.error
import urllib.request
from dataclasses import dataclass

from agent import __version__

log = logging.getLogger("gpuloans-agent")


@dataclass(frozen=True)
class Outcome:
    """done: the batch may leave the spool. retry_after: seconds to wait before any retry.
    split: the server found the batch too large; send it in halves."""

    done: bool
    retry_after: float = 0.0
    split: bool = False
    message: str = ""
    lost: int = 0  # samples given up on (counted into dropped_samples)


class Client:
    def __init__(self, server: str, token: str, node: str, timeout: float = 30.0):
        if not server.startswith(("http://", "https://")):
            raise ValueError(f"{server!r}: the server address must be http:// or https://")
        self.url = server.rstrip("/") + "/api/v1/samples"
        self.token, self.node, self.timeout = token, node, timeout
        self._warned: set[tuple[str, str]] = set()  # (device, reason) already logged

    def send(self, samples: list[dict], dropped: int) -> Outcome:
        body = json.dumps({"node": self.node, "agent_version": __version__,
                           "dropped_samples": dropped, "samples": samples}).encode()
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked above
            self.url, data=body, method="POST",
            headers={"Content-Type": "application/json",
                     "Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                answer = json.loads(response.read())
        except urllib.error.HTTPError as error:
            return self._refused(error, len(samples))
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as error:
            # Refused, reset, timed out, or cut off mid-answer (IncompleteRead): the batch may
            # or may not have been stored; sending it again is safe either way.
            return Outcome(done=False, message=f"server unreachable: {error!r}")
        for rejection in answer.get("rejected", []):
            self._report(rejection, samples)
        return Outcome(done=True, message=f"{answer['accepted']} accepted, "
                                          f"{answer['duplicates']} duplicates, "
                                          f"{len(answer['rejected'])} rejected")

    def _report(self, rejection: dict, samples: list[dict]) -> None:
        """A rejection as a warning once per device and reason (a device another node still
        holds, or past the node's device limit, is refused in every batch until that
        changes); later ones at debug level."""
        index = rejection.get("index")
        sample = samples[index] if isinstance(index, int) and 0 <= index < len(samples) else {}
        error = str(rejection.get("error", ""))
        key = (str(sample.get("gpu_uuid")), error.split(":", 1)[0])
        level = logging.DEBUG if key in self._warned else logging.WARNING
        self._warned.add(key)
        log.log(level, "sample rejected (%s %s): %s", sample.get("gpu_uuid"), sample.get("ts"),
                error)

    @staticmethod
    def _refused(error: urllib.error.HTTPError, count: int) -> Outcome:
        try:
            reason = json.loads(error.read()).get("error", "")
        except ValueError:
            reason = ""
        status = error.code
        wait = error.headers.get("Retry-After", "")
        if status == 413:
            return Outcome(done=False, split=True, message=f"413: {reason}")
        if status == 400:
            # The server cannot read this batch at all; resending it would never succeed.
            return Outcome(done=True, lost=count,
                           message=f"batch dropped, the server refused it: {reason}")
        if status in (401, 403):
            return Outcome(done=False, retry_after=300.0,
                           message=f"{status}: {reason}; check the token and --node")
        return Outcome(done=False, retry_after=float(wait) if wait.isdigit() else 0.0,
                       message=f"{status}: {reason or error.reason}")


class Backoff:
    """Exponential backoff with full jitter, reset by a success."""

    def __init__(self, base: float = 1.0, cap: float = 300.0):
        self.base, self.cap, self.failures = base, cap, 0

    def success(self) -> None:
        self.failures = 0

    def failure(self, at_least: float = 0.0) -> float:
        self.failures += 1
        ceiling = min(self.cap, self.base * 2 ** min(self.failures, 20))
        return max(at_least, random.uniform(0, ceiling))  # noqa: S311 - jitter, not a secret
