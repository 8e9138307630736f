"""The floor on Kubernetes, against the stand-in API server (tests/kube.py; an API server
cannot run here): the cases of the real Slurm test, read as Kueue Workloads and as pods, the
lister passing every minute."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine

from loans.models import Contract, ContractHold, Plan, Statement
from loans.services.guarantee import measure
from loans.services.ledger.closing import close_due_periods
from metering.intake import protocol
from metering.intake.ingest import ingest
from metering.models import AttributionRule, Cluster, Node
from metering.schedulers.kubernetes import lister
from tests import kube

H100, PRODUCT = "NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"
T0 = datetime(2026, 12, 1, 10, tzinfo=UTC)
MINUTE, SECOND = timedelta(minutes=1), timedelta(seconds=1)


def held(node: Node, uuid: str, start: datetime, until: datetime) -> None:
    seconds = int((until - start).total_seconds())
    sample = {"gpu_uuid": uuid, "model": H100, "ts": start.isoformat(), "interval_s": seconds,
              "allocated": True, "owner": {"namespace": "team-a"}}
    assert ingest(node, protocol.Envelope(node.name, "test", 0, [sample]),
                  now=until).rejected == []


def objects(queue: str, name: str, *, created, gpus=1, started=None, deleting=None,
            reason="Pending"):
    if queue == Cluster.Queue.KUEUE:
        return kube.workload(name, "team-a", created=created, gpus=gpus, admitted=started,
                             deleting=deleting, reason=reason, product=PRODUCT)
    return kube.pod(name, "team-a", created=created, gpus=gpus, scheduled=started,
                    deleting=deleting, product=PRODUCT)


@pytest.mark.parametrize("queue", [Cluster.Queue.KUEUE, Cluster.Queue.PODS])
def test_one_short_gpu_from_creation_to_admission_and_nothing_while_held(queue, tenant, db,
                                                                         settings, monkeypatch):
    """Base quota 2, one GPU running: "one" (1 GPU) waits from 09:58 to its admission at
    10:00:30, "two" (2 GPUs) beside it from 09:59 until it is deleted: min(1 + 2, 2 - 1) = 1
    short GPU for 150 s, nothing more once "one" runs (2 held). "three" waits while gpuloans
    holds the contract: nothing."""
    settings.GPU_TYPE_MODELS = {PRODUCT: H100}
    monkeypatch.setenv("KUBE_TOKEN", kube.TOKEN)
    plan = Plan.objects.create(
        name="H100 x2", gpu_model=H100, base_quota_gpus=2, max_quota_gpus=4,
        committed_gpu_hours=Decimal(100), committed_rate=Decimal("10.00"), term_months=12,
        currency="CNY", guarantee_pct=Decimal("99.99"), credit_tiers="100:10")
    contract = Contract(tenant=tenant, plan=plan, starts_on=T0.date(), time_zone="UTC",
                        status=Contract.Status.ACTIVE)
    contract.full_clean()
    contract.save()
    with kube.StandIn() as api:
        cluster = Cluster.objects.create(name="k8s", kind=Cluster.Kind.KUBERNETES,
                                         api_url=api.url, api_token_env="KUBE_TOKEN",
                                         queue=queue)
        AttributionRule.objects.create(tenant=tenant, cluster=cluster, value="team-a",
                                       field=AttributionRule.Field.NAMESPACE)
        node = Node.objects.create(name="gpu-k", cluster=cluster)

        def passes(at, *listed):
            api.workloads = api.pods = list(listed)
            lister.list_once(cluster, now=at)

        running = objects(queue, "running", created=T0 - 10 * MINUTE,
                          started=T0 - 10 * MINUTE)
        one = objects(queue, "one", created=T0 - 2 * MINUTE)
        two = objects(queue, "two", created=T0 - MINUTE, gpus=2)
        passes(T0 - MINUTE, running, one)
        passes(T0, running, one, two)
        one = objects(queue, "one", created=T0 - 2 * MINUTE, started=T0 + 30 * SECOND)
        passes(T0 + MINUTE, running, one, two)
        passes(T0 + 2 * MINUTE, running, one)  # "two" deleted while it waited
        ContractHold.objects.create(contract=contract, reason="hold", since=T0 + 5 * MINUTE,
                                    until=T0 + 9 * MINUTE)
        three = objects(queue, "three", created=T0 + 5 * MINUTE)
        passes(T0 + 6 * MINUTE, running, one, three)
        passes(T0 + 8 * MINUTE, running, one)
    held(node, "GPU-running", T0 - 10 * MINUTE, T0 + 20 * MINUTE)
    held(node, "GPU-one", T0 + 30 * SECOND, T0 + 20 * MINUTE)

    period = contract.periods()[0]
    [floor] = measure.read(contract, [(period, contract.terms_for(0))],
                           T0 + 20 * MINUTE).values()
    assert floor.measure.short_seconds == 150
    assert floor.measure.short_gpu_hours == pytest.approx(150 / 3600)
    assert floor.waits == 2  # "one" and "two"; "three" waited under gpuloans' own hold
    [worst, *_rest] = floor.worst
    assert (worst.job, worst.gpus, worst.held) == ("team-a/two", 2, 1.0)

    after = period.end + timedelta(hours=3)
    with time_machine.travel(after, tick=False):
        close_due_periods(after)
    statement = Statement.objects.get(contract=contract, period_index=0)
    assert (statement.credit_pct, statement.credit) == (10, Decimal(-100))
    assert statement.short_gpu_hours == Decimal("0.041667")  # 150 s of one GPU, to 1e-6
