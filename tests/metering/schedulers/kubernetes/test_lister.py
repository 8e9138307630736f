"""The Kubernetes lister against a stand-in API server (tests/kube.py) that serves what the
published schemas accept: Workloads and pods read as waits, page by page, their timelines kept
from pass to pass, and every way the API can fail said in one line."""

from datetime import UTC, datetime, timedelta

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from metering.models import AttributionRule, Cluster, JobWait
from metering.schedulers.kubernetes import lister, objects
from metering.tasks import list_kubernetes
from tests import kube

T0 = datetime(2026, 12, 1, 10, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


@pytest.fixture
def api():
    with kube.StandIn() as server:
        yield server


@pytest.fixture
def cluster(db, tenant, api, monkeypatch):
    monkeypatch.setenv("KUBE_TOKEN", kube.TOKEN)
    cluster = Cluster.objects.create(name="k8s", kind=Cluster.Kind.KUBERNETES, api_url=api.url,
                                     api_token_env="KUBE_TOKEN")
    AttributionRule.objects.create(tenant=tenant, cluster=cluster, value="team-a",
                                   field=AttributionRule.Field.NAMESPACE)
    return cluster


def rows(cluster) -> dict[str, JobWait]:
    return {w.name: w for w in JobWait.objects.filter(cluster=cluster)}


def test_workloads_are_waits_from_creation_to_admission_kept_across_passes(cluster, api,
                                                                           tenant):
    api.workloads = [
        kube.workload("running", "team-a", created=T0 - 10 * MINUTE, gpus=1,
                      admitted=T0 - 10 * MINUTE),
        kube.workload("one", "team-a", created=T0 - 2 * MINUTE, gpus=1),
        kube.workload("two", "team-a", created=T0 - MINUTE, gpus=1, count=2),
        kube.workload("stopped", "team-a", created=T0 - MINUTE, gpus=1, reason="Inadmissible"),
        kube.workload("cpu-only", "team-a", created=T0, gpus=0),
        kube.workload("other", "team-b", created=T0 - MINUTE, gpus=4, product="NVIDIA-H100"),
    ]
    done = lister.list_once(cluster, now=T0)
    assert (done.read, done.stored.new, done.gone) == (5, 4, 0)  # "running" started at once
    kept = rows(cluster)
    assert set(kept) == {"team-a/one", "team-a/two", "team-a/stopped", "team-b/other"}
    one = kept["team-a/one"]
    assert (one.tenant, one.scheduler, one.gpus, one.reason, one.capacity) == (
        tenant, "kueue", 1, "Pending", True)
    assert "insufficient unused quota" in one.message
    assert kept["team-a/two"].gpus == 2  # two pods of one GPU
    assert not kept["team-a/stopped"].capacity  # its queue is stopped, not full
    assert (kept["team-b/other"].tenant, kept["team-b/other"].gpu_type) == (None, "NVIDIA-H100")
    # A minute later: "one" was admitted at 10:00:30; "two" was deleted while it waited.
    api.workloads[1] = kube.workload("one", "team-a", created=T0 - 2 * MINUTE, gpus=1,
                                     admitted=T0 + timedelta(seconds=30))
    del api.workloads[2]
    done = lister.list_once(cluster, now=T0 + MINUTE)
    assert (done.stored.new, done.stored.updated, done.gone) == (0, 1, 1)
    kept = rows(cluster)
    assert (kept["team-a/one"].started, kept["team-a/one"].reason,
            kept["team-a/one"].capacity) == (T0 + timedelta(seconds=30), "Pending", True)
    assert (kept["team-a/two"].ended, kept["team-a/two"].state) == (T0 + MINUTE, "gone")
    # Listed again unchanged: nothing is written.
    assert lister.list_once(cluster, now=T0 + 2 * MINUTE).stored.updated == 0


def test_a_newer_kueue_is_read_in_v1beta2_and_an_older_one_in_v1beta1(cluster, api):
    api.workloads = [kube.workload("one", "team-a", created=T0, gpus=1)]
    lister.list_once(cluster, now=T0)
    assert [r.split("?")[0] for r in api.requests] == [kube.V1BETA2, kube.V1BETA1]
    api.v1beta2, api.requests[:] = True, []
    lister.list_once(cluster, now=T0)
    assert [r.split("?")[0] for r in api.requests] == [kube.V1BETA2]


def test_pods_are_waits_while_unschedulable_and_gated_ones_are_not_eligible(cluster, api):
    Cluster.objects.filter(pk=cluster.pk).update(queue=Cluster.Queue.PODS)
    cluster.refresh_from_db()
    api.pods = [
        kube.pod("a", "team-a", created=T0 - MINUTE, gpus=2),
        kube.pod("b", "team-a", created=T0 - MINUTE, gpus=1, gated=True),
        kube.pod("c", "team-a", created=T0 - MINUTE, gpus=1, scheduled=T0 - MINUTE),
    ]
    lister.list_once(cluster, now=T0)
    kept = rows(cluster)
    assert set(kept) == {"team-a/a", "team-a/b"}
    assert (kept["team-a/a"].scheduler, kept["team-a/a"].capacity, kept["team-a/a"].gpus) == (
        "pod", True, 2)
    assert kept["team-a/b"].eligible is None and not kept["team-a/b"].capacity
    api.pods[0] = kube.pod("a", "team-a", created=T0 - MINUTE, gpus=2,
                           scheduled=T0 + timedelta(seconds=20))
    lister.list_once(cluster, now=T0 + MINUTE)
    assert rows(cluster)["team-a/a"].started == T0 + timedelta(seconds=20)


def test_a_long_list_is_read_page_by_page(cluster, api):
    api.workloads = [kube.workload(f"w{k}", "team-a", created=T0, gpus=1) for k in range(1203)]
    assert lister.list_once(cluster, now=T0).read == 1203
    assert sum(kube.V1BETA1 in r for r in api.requests) == 3  # 500 a page


def test_the_token_is_read_from_a_file_and_a_wrong_one_is_said(cluster, api, tmp_path):
    token = tmp_path / "token"
    token.write_text(kube.TOKEN + "\n")
    Cluster.objects.filter(pk=cluster.pk).update(api_token_file=str(token), api_token_env="")
    cluster.refresh_from_db()
    assert lister.list_once(cluster, now=T0).read == 0
    token.write_text("stale")
    with pytest.raises(lister.KubernetesError, match="k8s: .*answered 401: the token was refused"):
        lister.list_once(cluster, now=T0)
    token.unlink()
    with pytest.raises(lister.KubernetesError, match="cannot read the token file"):
        lister.list_once(cluster, now=T0)


def test_a_role_that_may_not_list_is_named(cluster, api):
    api.forbidden = {kube.V1BETA1}
    with pytest.raises(lister.KubernetesError,
                       match="answered 403: the service account may not list it"):
        lister.list_once(cluster, now=T0)


def test_a_missing_variable_a_redirect_and_a_closed_port_are_said(cluster, api, monkeypatch):
    monkeypatch.delenv("KUBE_TOKEN")
    with pytest.raises(lister.KubernetesError, match="KUBE_TOKEN holds no token"):
        lister.list_once(cluster, now=T0)
    monkeypatch.setenv("KUBE_TOKEN", kube.TOKEN)
    api.redirect_to = "http://203.0.113.9/steal"  # the token is never sent there
    with pytest.raises(lister.KubernetesError, match="answered 302"):
        lister.list_once(cluster, now=T0)
    api.redirect_to = None
    Cluster.objects.filter(pk=cluster.pk).update(api_url="http://127.0.0.1:1")
    cluster.refresh_from_db()
    with pytest.raises(lister.KubernetesError, match="k8s: /apis"):
        lister.list_once(cluster, now=T0)


def test_https_is_checked_against_the_clusters_ca(db, tenant, tmp_path, monkeypatch):
    monkeypatch.setenv("KUBE_TOKEN", kube.TOKEN)
    cert, key = kube.certificate(tmp_path)
    with kube.StandIn(certificate=(cert, key)) as api:
        api.workloads = [kube.workload("one", "team-a", created=T0, gpus=1)]
        cluster = Cluster.objects.create(name="k8s", kind=Cluster.Kind.KUBERNETES,
                                         api_url=api.url, api_token_env="KUBE_TOKEN")
        with pytest.raises(lister.KubernetesError, match="CERTIFICATE_VERIFY_FAILED"):
            lister.list_once(cluster, now=T0)  # the system's CAs do not know it
        cluster.api_ca_file = str(cert)
        assert lister.list_once(cluster, now=T0).read == 1


def test_the_job_reads_every_cluster_and_one_that_fails_does_not_stop_the_others(
        cluster, api, monkeypatch):
    Cluster.objects.create(name="broken", kind=Cluster.Kind.KUBERNETES,
                           api_url="http://127.0.0.1:1", api_token_env="KUBE_TOKEN")
    api.workloads = [kube.workload("one", "team-a", created=T0, gpus=1)]
    said = list_kubernetes()
    assert "k8s: 1 read, 1 new" in said and "broken: /apis" in said
    with pytest.raises(CommandError, match="1 of 2 clusters could not be read"):
        call_command("list_kubernetes")
    call_command("list_kubernetes", "--cluster", "k8s")
    with pytest.raises(CommandError, match="No cluster named nowhere"):
        call_command("list_kubernetes", "--cluster", "nowhere")


def test_a_cluster_api_needs_a_credential_source(db):
    cluster = Cluster(name="k", kind=Cluster.Kind.KUBERNETES, api_url="https://api.k8s.local:6443")
    with pytest.raises(Exception, match="token is read from"):
        cluster.full_clean()


@pytest.mark.parametrize("count, gpus", [("2", 2), ("1.5", 0), ("500m", 0), ("-1", 0)])
def test_a_gpu_quantity_is_a_whole_count_of_gpus(count, gpus):
    obj = kube.pod("a", "team-a", created=T0, gpus=1)
    obj["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = count
    seen = objects.pod(obj)
    assert (seen.gpus if seen else 0) == gpus


def test_the_reader_in_deploy_may_only_list_and_get_workloads_and_pods():
    """deploy/kubernetes/gpuloans-reader.yaml: what the lister needs, and nothing that
    writes; its binding and token name its service account."""
    path = kube.SCHEMAS.parents[4] / "deploy" / "kubernetes" / "gpuloans-reader.yaml"
    docs = {d["kind"]: d for d in yaml.safe_load_all(path.read_text())}
    rules = docs["ClusterRole"]["rules"]
    assert {(group, resource) for r in rules for group in r["apiGroups"]
            for resource in r["resources"]} == {("", "pods"), ("kueue.x-k8s.io", "workloads")}
    assert {verb for r in rules for verb in r["verbs"]} == {"get", "list"}
    account = docs["ServiceAccount"]["metadata"]
    [subject] = docs["ClusterRoleBinding"]["subjects"]
    assert (subject["name"], subject["namespace"]) == (account["name"], account["namespace"])
    assert docs["ClusterRoleBinding"]["roleRef"]["name"] == docs["ClusterRole"]["metadata"][
        "name"]
    secret = docs["Secret"]
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert secret["metadata"]["annotations"]["kubernetes.io/service-account.name"] == account[
        "name"]
