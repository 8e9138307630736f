"""A Kubernetes cluster's waiting work, listed every minute (KUBERNETES_LIST_SECONDS) through
its API with a read-only service account (deploy/kubernetes/gpuloans-reader.yaml), and kept as
the floor's waits (metering.schedulers.waits).

The cluster record holds the API's address and where its token is read from (a file, such as
a mounted secret, or an environment variable); the token itself is never stored. Kueue's
Workloads are read where the cluster queues with Kueue, else pods. The API forgets an object
once it is gone, so each pass compares what it lists with what it kept: an object kept as
waiting that is no longer listed ended at this pass (cancelled or deleted while it waited, to
the minute). An object created and deleted between two passes is never seen.

Python's own HTTPS client, not the Kubernetes client library: two GETs with a bearer token,
the certificate checked against the cluster's CA (or the system's), pages of 500 followed by
their `continue` token.
"""

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.conf import settings

from metering.models import Cluster, JobWait
from metering.schedulers import waits
from metering.schedulers.kubernetes import objects

KUEUE = ("/apis/kueue.x-k8s.io/v1beta2/workloads", "/apis/kueue.x-k8s.io/v1beta1/workloads")
PODS = "/api/v1/pods"
PAGE = 500


class KubernetesError(Exception):
    """The API could not be read (no credential, refused, not found): said in one line."""


@dataclass(frozen=True)
class Listed:
    read: int  # objects asking for GPUs
    stored: waits.Stored
    gone: int  # kept as waiting, no longer listed: ended at this pass


def token_of(cluster: Cluster) -> str:
    if cluster.api_token_file:
        try:
            return Path(cluster.api_token_file).read_text().strip()
        except OSError as error:
            raise KubernetesError(f"{cluster.name}: cannot read the token file "
                                  f"{cluster.api_token_file}: {error.strerror}") from None
    token = os.environ.get(cluster.api_token_env, "").strip()
    if not token:
        raise KubernetesError(f"{cluster.name}: the environment variable "
                              f"{cluster.api_token_env or '(none named)'} holds no token")
    return token


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """The API never redirects a list; following one would carry the token elsewhere."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise urllib.error.HTTPError(req.full_url, code, f"redirected to {newurl}", headers, fp)


class Api:
    """The cluster's API, read-only."""

    def __init__(self, cluster: Cluster):
        self.base = cluster.api_url.rstrip("/")
        self.name = cluster.name
        if urllib.parse.urlsplit(self.base).scheme not in ("https", "http"):
            raise KubernetesError(f"{cluster.name}: the API's address must be https://")
        self.token = token_of(cluster)
        try:
            context = ssl.create_default_context(cafile=cluster.api_ca_file or None)
        except (OSError, ssl.SSLError) as error:
            raise KubernetesError(f"{cluster.name}: cannot read the CA file "
                                  f"{cluster.api_ca_file}: {error}") from None
        self.opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context),
                                                  _NoRedirects())

    def get(self, path: str, query: dict) -> dict:
        url = f"{self.base}{path}?{urllib.parse.urlencode(query)}"
        # The scheme is https or http (checked above), never file: or another.
        request = urllib.request.Request(url, headers={  # noqa: S310
            "Authorization": f"Bearer {self.token}", "Accept": "application/json"})
        try:
            with self.opener.open(request,
                                  timeout=settings.KUBERNETES_API_TIMEOUT_SECONDS) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as error:
            why = {401: ": the token was refused",
                   403: ": the service account may not list it (get and list, as "
                        "deploy/kubernetes/gpuloans-reader.yaml grants)"}.get(error.code, "")
            raise KubernetesError(f"{self.name}: {path} answered {error.code}{why}") from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            reason = getattr(error, "reason", error)
            raise KubernetesError(f"{self.name}: {path}: {reason}") from None

    def items(self, path: str) -> list[dict]:
        """Every object of a list, page by page."""
        out, token = [], ""
        while True:
            page = self.get(path, {"limit": PAGE, **({"continue": token} if token else {})})
            out += page.get("items") or []
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return out

    def workloads(self) -> list[dict]:
        """Kueue's Workloads: v1beta2 where the cluster serves it, else v1beta1."""
        for path in KUEUE:
            try:
                return self.items(path)
            except KubernetesError as error:
                if "answered 404" not in str(error) or path == KUEUE[-1]:
                    raise
        return []


def list_once(cluster: Cluster, *, now: datetime, api: Api | None = None) -> Listed:
    """One pass over the cluster's Workloads or pods."""
    api = api or Api(cluster)
    if cluster.queue == Cluster.Queue.KUEUE:
        scheduler, found = JobWait.Scheduler.KUEUE, [objects.workload(o) for o in api.workloads()]
    else:
        scheduler, found = JobWait.Scheduler.POD, [objects.pod(o) for o in api.items(PODS)]
    seen = [s for s in found if s is not None]
    stored = waits.store(cluster, scheduler, seen, now)
    listed = {s.key for s in seen}
    gone = [w.pk for w in waits.still_waiting(cluster, scheduler) if w.key not in listed]
    JobWait.objects.filter(pk__in=gone).update(ended=now, state="gone", updated_at=now)
    return Listed(len(seen), stored, len(gone))


def clusters() -> list[Cluster]:
    """The Kubernetes clusters whose API gpuloans reads."""
    return list(Cluster.objects.filter(kind=Cluster.Kind.KUBERNETES).exclude(api_url=""))
