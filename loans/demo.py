"""Demo data: tenants, plans, contracts, nodes and 90 days of hourly usage, from the contracts'
first local midnight (so every period of theirs has its data from its start) to now.

Every value is drawn from a random generator seeded by what it describes (tenant and day), so a
second run writes the same rows and only adds the hours that have passed since: the seed is
idempotent. Four stories: vision heads for overage, nlp wastes its commitment, speech holds GPUs
that sit idle, recsys fits its plan; one node runs unattributed sandbox work. vision and nlp
belong to one organisation and share their commitments (a sharing group): nlp's unused hours
cover vision's overage at each close.
"""

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from loans.maths.billing import local_midnight
from loans.models import Contract, Membership, Plan, SharingGroup, SharingMember, Tenant
from loans.services.ledger import forecasting, sharing
from metering import partitions
from metering.attribution import Attributor, Rule
from metering.intake import owners
from metering.models import (
    AttributionRule,
    Cluster,
    Gpu,
    JobWait,
    Node,
    RawHorizon,
    UsageSample,
    default_cluster,
)
from metering.recount import insert_rows, rebuild_rollups
from metering.schedulers import waits
from metering.usage import ceil_hour, floor_hour

DAYS = 90
HOUR = timedelta(hours=1)
SIGNED_BEFORE = timedelta(days=14)
DEMO_PASSWORD = "gpuloans-demo"
OPERATOR = ("operator", "gpuloans-operator")
SHARING = ("Acme AI", ("vision", "nlp"))  # the demo's sharing group and its teams
GPU_NAMESPACE = uuid.UUID("9b0d7c52-5f1e-4c1a-9b53-2f5d1c3e8a10")

H100 = ("NVIDIA H100 80GB HBM3", 81559)
L40S = ("NVIDIA L40S", 46068)
A100 = ("NVIDIA A100-SXM4-80GB", 81920)

PLANS = [
    # name, model, base, max, committed GPU-h, rate, overage rate, term, guarantee %, credits
    ("H100 Guaranteed 8", H100[0], 8, 16, "4000", "18.00", None, 12, "99", "99:5, 95:15"),
    ("H100 Guaranteed 16", H100[0], 16, 32, "9000", "17.00", None, 12, "99", "99:5, 95:15"),
    ("L40S Inference 8", L40S[0], 8, 12, "4500", "6.50", None, 12, "95", ""),
    ("A100 Flex 4", A100[0], 4, 8, "2000", "11.00", "15.00", 6, "95", "95:10, 90:25"),
    ("H100 Burst 32", H100[0], 16, 32, "6000", "19.50", None, 3, "90", ""),
]
# recsys's jobs waited for A100s three days of its first period (days after its start, hour of
# the local day, hours, GPUs): below its guarantee of 95%, its first statement credits 10%.
WAITS = [(5, 9, 24, 2), (12, 10, 24, 2), (19, 8, 24, 2)]


@dataclass(frozen=True)
class Story:
    """How a tenant uses its GPUs: GPUs held and utilisation by hour of a local day."""

    slug: str
    name: str
    plan: str
    nodes: list[tuple[str, tuple[str, int]]]
    day: float  # GPUs held in working hours on a weekday
    night: float
    weekend: float
    util: float  # mean utilisation of a held GPU, percent
    burst_gpus: int = 0  # extra GPUs during a training burst
    burst_every: int = 0  # a burst starts about once in this many days


STORIES = [
    Story("vision", "Vision Lab", "H100 Guaranteed 8", [("h100-01", H100), ("h100-02", H100)],
          day=7, night=5, weekend=4, util=78, burst_gpus=6, burst_every=10),
    Story("nlp", "NLP Platform", "H100 Guaranteed 16", [("h100-03", H100), ("h100-04", H100)],
          day=6, night=3, weekend=2, util=64, burst_gpus=4, burst_every=15),
    Story("speech", "Speech", "L40S Inference 8", [("l40s-01", L40S)],
          day=6, night=6, weekend=6, util=4),
    Story("recsys", "Recommendation", "A100 Flex 4", [("a100-01", A100)],
          day=3.5, night=2.2, weekend=2, util=61),
]
SANDBOX_NODE = ("h100-05", H100)
GPUS_PER_NODE = 8


def gpus_held(story: Story, local: datetime, rng: random.Random, bursting: bool) -> int:
    weekday = local.weekday() < 5
    working = 9 <= local.hour < 21
    level = story.day if weekday and working else story.night if weekday else story.weekend
    level += rng.gauss(0, 0.6)
    if bursting:
        level += story.burst_gpus
    return max(0, round(level))


def is_bursting(story: Story, day: date) -> bool:
    """Three-day training runs, one every `burst_every` days, on a schedule of the tenant's own."""
    if not story.burst_every:
        return False
    offset = sum(map(ord, story.slug))
    return (day.toordinal() + offset) % story.burst_every < 3


def seed(
    *, now: datetime, log: Callable[[str], None], days: int = DAYS
) -> list[tuple[str, str, str]]:
    """Create or complete the demo; returns the logins (user, password, what it sees)."""
    zone = ZoneInfo(settings.TIME_ZONE)
    first_day = _first_day(now.astimezone(zone).date() - timedelta(days=days))
    logins = [(*OPERATOR, "operator (admin, every tenant)")]
    with transaction.atomic():
        plans = _plans()
        log(f"plans: {len(plans)} in the catalogue")
        _user(OPERATOR[0], OPERATOR[1], staff=True)
        tenants = {}
        for story in STORIES:
            tenant, _created = Tenant.objects.get_or_create(
                slug=story.slug,
                defaults={"name": story.name, "alert_emails": f"{story.slug}-lead@example.com"},
            )
            tenants[story.slug] = tenant
            for role in (Membership.Role.LEAD, Membership.Role.MEMBER):
                username = f"{story.slug}-{role}"
                user = _user(username, DEMO_PASSWORD)
                Membership.objects.get_or_create(user=user, tenant=tenant, defaults={"role": role})
                logins.append((username, DEMO_PASSWORD, f"{role} of {story.name}"))
            AttributionRule.objects.get_or_create(
                cluster_id=default_cluster(), field=AttributionRule.Field.NAMESPACE,
                value=story.slug, defaults={"tenant": tenant, "priority": 10},
            )
            _contract(tenant, plans[story.plan], first_day)
            for node_name, model in story.nodes:
                _node(node_name, model, tenant)
        _node(*SANDBOX_NODE, None)
        _group(tenants, now)
        _waits(first_day, zone, now)
        log(f"tenants: {', '.join(tenants)}; nodes: {Node.objects.count()}")

    end = floor_hour(now)
    # The story starts with the contracts: every period of theirs has its data from its start.
    start = history_start = min(end, local_midnight(first_day, zone))
    # Hours before the raw horizon have lost their samples to retention and keep their
    # rollups; writing their samples again would count them twice (on PostgreSQL every insert
    # is rolled up) and no recount may touch them.
    horizon = RawHorizon.complete_from()
    if horizon is not None and horizon > start:
        start = min(end, ceil_hour(horizon))
    count = _write(_fleet_samples(start, end, zone), _attribution())
    # The demo's nodes and GPUs have been reporting since its history began (intake accepts a
    # node's samples only from its registration: the simulated agents' late ones too).
    Gpu.objects.filter(first_seen_at__gt=history_start).update(first_seen_at=history_start)
    Node.objects.filter(created_at__gt=history_start).update(created_at=history_start)
    log(f"usage: {count} hourly samples offered (those already stored are kept)")
    log("rollups: recounting from the samples")
    rebuild_rollups(start, end)
    measured = forecasting.measure_coverage(now)
    log("forecast band: held " + ", ".join(
        f"{found.inside} of {found.forecasts} at {bucket} days left"
        for bucket, found in measured.items()))
    return logins


def _first_day(wanted: date) -> date:
    """The demo's first day: its contracts' start, once they exist (seeding again keeps the
    story's beginning), else the day `--days` asks for."""
    started = Contract.objects.filter(tenant__slug__in=[s.slug for s in STORIES],
                                      status=Contract.Status.ACTIVE).order_by("starts_on")
    first = started.values_list("starts_on", flat=True).first()
    return first or wanted


def _plans() -> dict[str, Plan]:
    plans = {}
    for name, model, base, cap, committed, rate, overage, term, floor, credits in PLANS:
        plan, _created = Plan.objects.get_or_create(
            name=name,
            defaults={
                "gpu_model": model, "base_quota_gpus": base, "max_quota_gpus": cap,
                "committed_gpu_hours": Decimal(committed), "committed_rate": Decimal(rate),
                "overage_rate": Decimal(overage) if overage else None, "term_months": term,
                "currency": settings.DEFAULT_CURRENCY, "guarantee_pct": Decimal(floor),
                "credit_tiers": credits,
            },
        )
        plans[name] = plan
    return plans


def _group(tenants: dict[str, Tenant], now: datetime) -> None:
    """The sharing group, its teams sharing from their contracts' first period."""
    name, slugs = SHARING
    group, _created = SharingGroup.objects.get_or_create(
        name=name, defaults={"currency": settings.DEFAULT_CURRENCY})
    for slug in slugs:
        contract = tenants[slug].contracts.filter(status=Contract.Status.ACTIVE).first()
        if contract is not None and not SharingMember.objects.filter(contract=contract).exists():
            sharing.join(group, contract, by=None, now=now)


def _waits(first_day: date, zone: ZoneInfo, now: datetime) -> None:
    """recsys's jobs that waited for A100s (WAITS), as the cluster's lister would have kept
    them; stored again, nothing changes."""
    cluster = Cluster.objects.get(pk=default_cluster())
    seen = []
    for day, hour, hours, gpus in WAITS:
        start = datetime.combine(first_day + timedelta(days=day), time(hour), zone)
        start = start.astimezone(UTC)
        if start + timedelta(hours=hours) > now:
            continue
        key = f"demo-recsys-{day}"
        seen.append(waits.Seen(key=key, name=f"recsys/train-{day}", gpus=gpus,
                               submitted=start, eligible=start,
                               started=start + timedelta(hours=hours), ended=None,
                               reason="Unschedulable", capacity=True, namespace="recsys",
                               gpu_type=A100[0].replace(" ", "-")))
    waits.store(cluster, JobWait.Scheduler.POD, seen, now)


def _user(username: str, password: str, staff: bool = False):
    user, created = get_user_model().objects.get_or_create(
        username=username, defaults={"is_staff": staff, "is_superuser": staff}
    )
    if created:
        user.set_password(password)
        user.save(update_fields=["password"])
    return user


def _contract(tenant: Tenant, plan: Plan, starts_on: date) -> None:
    if tenant.contracts.filter(status=Contract.Status.ACTIVE).exists():
        return
    contract = Contract(tenant=tenant, plan=plan, starts_on=starts_on,
                        status=Contract.Status.ACTIVE)
    # Signed a fortnight before it starts, as a contract is.
    contract.sign(now=local_midnight(starts_on, contract.zone) - SIGNED_BEFORE)
    contract.full_clean()
    contract.save()


def _node(name: str, model: tuple[str, int], tenant: Tenant | None) -> None:
    node, _created = Node.objects.get_or_create(name=name, defaults={"default_tenant": tenant})
    for index in range(GPUS_PER_NODE):
        Gpu.objects.get_or_create(
            uuid=f"GPU-{uuid.uuid5(GPU_NAMESPACE, f'{name}/{index}')}",
            defaults={"node": node, "index": index, "model": model[0],
                      "memory_total_mib": model[1]},
        )


def _pool(node_names: list[str]) -> list[Gpu]:
    return list(Gpu.objects.filter(node__name__in=node_names).order_by("node__name", "index"))


def hour_state(story: Story, hour: datetime, zone: ZoneInfo, size: int) -> list[tuple]:
    """(position in the story's GPU pool, allocated, utilisation) of each GPU in one hour."""
    local = hour.astimezone(zone)
    rng = random.Random(f"{story.slug}:{hour.isoformat()}")
    bursting = is_bursting(story, local.date())
    held = min(size, gpus_held(story, local, rng, bursting))
    offset = local.toordinal() % size  # which GPUs are held rotates by day, as jobs move
    state = []
    for position in range(size):
        util = min(100.0, max(0.0, rng.gauss(story.util + (12 if bursting else 0), 8)))
        allocated = position < held
        state.append(((position + offset) % size, allocated, round(util, 1) if allocated else 0.0))
    return state


def sandbox_state(hour: datetime, size: int) -> list[tuple]:
    rng = random.Random(f"sandbox:{hour.isoformat()}")
    held = rng.choice([0, 1, 1, 2])
    return [(position, position < held, round(rng.uniform(20, 60), 1) if position < held else 0.0)
            for position in range(size)]


def fleet_state(hour: datetime, zone: ZoneInfo, pools: dict[str, list]) -> list[tuple]:
    """(GPU, allocated, utilisation, owner) of every demo GPU in one hour; `pools` maps each
    story's slug (and "sandbox") to its GPUs."""
    out = []
    for story in STORIES:
        pool = pools[story.slug]
        for position, allocated, util in hour_state(story, hour, zone, len(pool)):
            out.append((pool[position], allocated, util,
                        {"namespace": story.slug} if allocated else None))
    pool = pools["sandbox"]
    for position, allocated, util in sandbox_state(hour, len(pool)):
        out.append((pool[position], allocated, util,
                    {"namespace": "sandbox"} if allocated else None))
    return out


def pools() -> dict[str, list]:
    """The demo's GPUs: each story's pool, in a fixed order, and the sandbox node's."""
    found = {story.slug: _pool([name for name, _model in story.nodes]) for story in STORIES}
    found["sandbox"] = _pool([SANDBOX_NODE[0]])
    return found


def node_tokens(pools: dict[str, list]) -> dict[str, str]:
    """A fresh token for each node of the demo's fleet (`pools`), by node name: what the
    simulated agents post with. The tokens issued before are revoked."""
    gpus = [gpu for pool in pools.values() for gpu in pool]
    return {node.name: node.issue_token()
            for node in Node.objects.filter(gpus__in=gpus).distinct()}


def _fleet_samples(start: datetime, end: datetime, zone: ZoneInfo):
    """Hourly samples, except for GPU-hours that live (simulated) agents already reported."""
    live = {(gpu, floor_hour(ts)) for gpu, ts in UsageSample.objects.filter(
        ts__gte=start, ts__lt=end, interval_s__lt=3600).values_list("gpu_id", "ts")}
    demo_pools = pools()
    hour = start
    while hour < end:
        for gpu, allocated, util, owner in fleet_state(hour, zone, demo_pools):
            if (gpu.pk, hour) not in live:
                yield _sample(gpu, hour, allocated, util, owner)
        hour += HOUR


COLUMNS = (
    "gpu_id", "ts", "tenant_id", "owner_id", "interval_s", "allocated", "fraction", "util_pct",
    "mem_used_mib", "power_w", "temp_c",
)


def _sample(gpu: Gpu, hour: datetime, allocated: bool, util: float, owner) -> dict:
    return {
        "gpu_id": gpu.pk, "ts": hour.astimezone(UTC), "node_id": gpu.node_id,
        "interval_s": 3600, "allocated": allocated, "fraction": 1.0, "util_pct": util,
        "mem_used_mib": int(gpu.memory_total_mib * util / 110) if allocated else 0,
        "power_w": round(80 + util * 6, 1), "temp_c": int(32 + util / 2), "owner": owner,
    }


def _attribution() -> Callable[[dict], int | None]:
    """Attribute as ingestion does: the tenant's rules, then the node's default tenant."""
    attributor = Attributor(
        Rule(rule.tenant_id, rule.field, rule.value, rule.priority, rule.cluster_id)
        for rule in AttributionRule.objects.all()
    )
    nodes = {node.pk: node for node in Node.objects.all()}

    def tenant_of(sample: dict) -> int | None:
        node = nodes[sample["node_id"]]
        return attributor.tenant_for(sample["owner"], node.name, node.cluster_id,
                                     node.default_tenant_id)

    return tenant_of


def _write(samples, attribute: Callable[[dict], int | None]) -> int:
    """Insert, skipping (GPU, ts) already stored: the seed's idempotency. Returns rows offered."""
    adapt = connection.ops.adapt_datetimefield_value
    samples = list(samples)
    for sample, owner_id in zip(samples, owners.ids_of([s["owner"] for s in samples]),
                                strict=True):
        sample["owner_id"] = owner_id
    rows, days = [], set()
    for sample in samples:
        sample["tenant_id"] = attribute(sample)
        days.add(sample["ts"].date())
        sample["ts"] = adapt(sample["ts"])
        rows.append(tuple(sample[column] for column in COLUMNS))
    partitions.ensure_partitions(days)
    with transaction.atomic():
        # Hourly samples of GPU-hours no live agent reported: they overlap nothing stored.
        insert_rows(UsageSample, COLUMNS, rows, skip_existing=True, checked=True)
    return len(rows)
