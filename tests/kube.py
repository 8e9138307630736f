"""A stand-in for a Kubernetes API server (one cannot run here): an HTTP(S) server of the test's
own that answers the two lists gpuloans reads, Kueue's Workloads and core/v1 pods, page by page
(`limit` and `continue`), to a bearer token, as the real API server does. Every object it
serves is first validated against the published schemas (Kueue's Workload CRD, Kubernetes'
Pod definitions, both vendored under tests/metering/schedulers/kubernetes/schemas), unknown
fields refused as `kubectl --validate=strict` refuses them; builders below make them."""

import functools
import json
import ssl
import subprocess
import threading
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import yaml
from jsonschema import Draft202012Validator

SCHEMAS = Path(__file__).resolve().parent / "metering" / "schedulers" / "kubernetes" / "schemas"
WORKLOADS_CRD = "kueue.x-k8s.io_workloads.yaml"
POD_DEFINITIONS = "podlist-v1.json"
V1BETA1 = "/apis/kueue.x-k8s.io/v1beta1/workloads"
V1BETA2 = "/apis/kueue.x-k8s.io/v1beta2/workloads"
PODS = "/api/v1/pods"
TOKEN = "stand-in-service-account-token"  # noqa: S105 - the stand-in's own, no secret


def strict(schema):
    """An OpenAPI schema as `kubectl apply --validate=strict` applies it: an object that lists
    its properties takes no others (unless it says it keeps unknown fields)."""
    if isinstance(schema, dict):
        schema = {key: strict(value) for key, value in schema.items()}
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [strict(value) for value in schema]
    return schema


@functools.cache
def _definitions() -> dict:
    return strict(json.loads((SCHEMAS / POD_DEFINITIONS).read_text())["definitions"])


@functools.cache
def pod_validator() -> Draft202012Validator:
    return Draft202012Validator({"$ref": "#/definitions/io.k8s.api.core.v1.Pod",
                                 "definitions": _definitions()})


@functools.cache
def workload_validator() -> Draft202012Validator:
    """The v1beta1 schema of Kueue's published Workload CRD, its metadata Kubernetes' own
    ObjectMeta (a CRD leaves it to the API server)."""
    crd = yaml.load((SCHEMAS / WORKLOADS_CRD).read_text(), Loader=yaml.CSafeLoader)
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
    schema = strict(served["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = {
        "$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
    return Draft202012Validator({**schema, "definitions": _definitions()})


def _stamp(moment: datetime | None) -> str | None:
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(name: str, namespace: str, uid: str, created: datetime,
          deleting: datetime | None) -> dict:
    meta = {"name": name, "namespace": namespace, "uid": uid,
            "creationTimestamp": _stamp(created), "resourceVersion": "1"}
    if deleting is not None:
        meta["deletionTimestamp"] = _stamp(deleting)
    return meta


def _container(gpus: int) -> dict:
    return {"name": "train", "image": "registry.local/train:1",
            "resources": {"requests": {"nvidia.com/gpu": str(gpus), "cpu": "4"},
                          "limits": {"nvidia.com/gpu": str(gpus)}}}


def _condition(kind: str, status: str, at: datetime, reason: str, message: str = "") -> dict:
    return {"type": kind, "status": status, "lastTransitionTime": _stamp(at), "reason": reason,
            "message": message or reason}


def workload(name: str, namespace: str, *, created: datetime, gpus: int, count: int = 1,
             admitted: datetime | None = None, reason: str = "Pending",
             finished: datetime | None = None, deleting: datetime | None = None,
             active: bool = True, product: str | None = None) -> dict:
    """A Kueue Workload (v1beta1) of one pod set: pending for `reason` until `admitted` (its
    QuotaReserved condition's transition), finished or being deleted as given."""
    template = {"spec": {"containers": [_container(gpus)], "restartPolicy": "Never",
                         **({"nodeSelector": {"nvidia.com/gpu.product": product}}
                            if product else {})}}
    reserved = _condition(
        "QuotaReserved", "True", admitted, "QuotaReserved",
        "Quota reserved in ClusterQueue") if admitted else _condition(
        "QuotaReserved", "False", created, reason,
        "couldn't assign flavors to pod set main: insufficient unused quota for "
        "nvidia.com/gpu in flavor h100, 1 more needed" if reason == "Pending" else
        "ClusterQueue is inactive")
    conditions = [reserved]
    if finished is not None:
        conditions.append(_condition("Finished", "True", finished, "Succeeded"))
    obj = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
           "metadata": _meta(name, namespace, f"uid-{name}", created, deleting),
           "spec": {"active": active, "queueName": "team-queue",
                    "podSets": [{"name": "main", "count": count, "template": template}]},
           "status": {"conditions": conditions}}
    workload_validator().validate(obj)
    return obj


def pod(name: str, namespace: str, *, created: datetime, gpus: int,
        scheduled: datetime | None = None, gated: bool = False,
        deleting: datetime | None = None, product: str | None = None) -> dict:
    """A pod: Unschedulable (or gated) until `scheduled`, being deleted as given."""
    spec = {"containers": [_container(gpus)], "restartPolicy": "Never"}
    if gated:
        spec["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    if product:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": product}
    if scheduled is not None:
        condition = _condition("PodScheduled", "True", scheduled, "Scheduled")
    elif gated:
        condition = _condition("PodScheduled", "False", created, "SchedulingGated",
                               "Scheduling is blocked due to non-empty scheduling gates")
    else:
        condition = _condition("PodScheduled", "False", created, "Unschedulable",
                               "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")
    obj = {"apiVersion": "v1", "kind": "Pod",
           "metadata": _meta(name, namespace, f"uid-{name}", created, deleting),
           "spec": spec,
           "status": {"phase": "Running" if scheduled else "Pending",
                      "conditions": [condition]}}
    pod_validator().validate(obj)
    return obj


class StandIn:
    """The API server's two lists, to `token`; v1beta2 Workloads are not served (an older
    Kueue) unless `v1beta2` says so. Tests change `workloads` and `pods` between passes."""

    def __init__(self, token: str = TOKEN, *, v1beta2: bool = False,
                 certificate: tuple[Path, Path] | None = None):
        self.token, self.v1beta2 = token, v1beta2
        self.workloads: list[dict] = []
        self.pods: list[dict] = []
        self.requests: list[str] = []
        self.redirect_to: str | None = None
        self.forbidden: set[str] = set()  # paths the service account may not list (RBAC)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append(self.path)
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                if self.headers.get("Authorization") != f"Bearer {server.token}":
                    return self._answer(401, {"kind": "Status", "code": 401,
                                              "reason": "Unauthorized"})
                if parts.path in server.forbidden:
                    return self._answer(403, {"kind": "Status", "code": 403,
                                              "reason": "Forbidden"})
                if server.redirect_to:
                    self.send_response(302)
                    self.send_header("Location", server.redirect_to)
                    self.end_headers()
                    return None
                items = {V1BETA1: server.workloads, PODS: server.pods,
                         **({V1BETA2: server.workloads} if server.v1beta2 else {})}.get(
                    parts.path)
                if items is None:
                    return self._answer(404, {"kind": "Status", "code": 404,
                                              "reason": "NotFound"})
                start, limit = int(query.get("continue") or 0), int(query.get("limit") or 500)
                page = items[start:start + limit]
                more = start + limit < len(items)
                return self._answer(200, {
                    "kind": "PodList" if parts.path == PODS else "WorkloadList",
                    "apiVersion": "v1" if parts.path == PODS else "kueue.x-k8s.io/v1beta1",
                    "metadata": {"resourceVersion": "7",
                                 **({"continue": str(start + limit)} if more else {})},
                    "items": page})

            def _answer(self, status: int, body: dict):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.scheme = "http"
        if certificate is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*map(str, certificate))
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            self.scheme = "https"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "StandIn":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (Debian's openssl): the cluster's own CA."""
    cert, key = folder / "api.crt", folder / "api.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=kube-apiserver",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key
