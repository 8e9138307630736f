"""The ledger's invariants over random histories, run through the real services (ingestion,
closing, amendments, termination, re-attribution, plan edits) and checked against a
brute-force model written here, from first principles:

- every allocated GPU-hour attributed to a tenant inside one of its contracts' windows is billed
  exactly once over that contract's statements (its period statement plus corrections);
- the money billed equals, to the cent, the sum over periods of C * r_c + max(0, U - C) * r_o
  at the period's final usage U and the terms in force at its start, less each period's
  service credit at its final availability (jobs that waited for room while the tenant held
  less than its base quota; the waits may be reported after the period's statement, and the
  credit is then a correction);
- no statement or correction row ever changes once written;
- no hour is billed to two contracts (the tenant's windows never overlap).
"""

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.test import override_settings
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from loans.models import Contract, CorrectionLine, Plan, Statement, Tenant
from loans.services.ledger.amendments import amend, terminate
from loans.services.ledger.closing import close_due_periods
from metering import partitions
from metering.intake.ingest import forget_gpus
from metering.models import Cluster, default_cluster
from metering.schedulers import waits
from metering.services import reattribute
from tests.ledger import HOUR, attribute, meter, midnight, months_later
from tests.tiers import examples

D = Decimal
T0 = datetime(2026, 1, 1, tzinfo=UTC)
ZONES = ["UTC", "Asia/Shanghai", "America/New_York", "Europe/Berlin"]
TERMS0 = {"base_quota_gpus": 1, "max_quota_gpus": 3, "committed_gpu_hours": D(30),
          "committed_rate": D("10.0000"), "overage_rate": D("12.0000")}
NAMESPACES = ["vision", "speech", None]


# The minor unit of each currency the histories are billed in (ISO 4217): none, two, three.
MINOR_UNIT = {"JPY": D("1"), "CNY": D("0.01"), "KWD": D("0.001")}


# The plan's guarantee: availability below 95% credits 10% of the committed cost, below 90% 25%.
TIERS = "95:10, 90:25"


def credit(terms: dict, short_hours: int, period_hours: int, currency: str) -> Decimal:
    """The period's service credit, from the hours in which the tenant was short of its base
    quota: the committed cost (rounded) times the tier's percent, rounded, negative."""
    availability = 1 - Fraction(short_hours, period_hours)
    percent = 25 if availability < Fraction(90, 100) else 10 if availability < Fraction(
        95, 100) else 0
    unit = MINOR_UNIT[currency]
    committed = (terms["committed_gpu_hours"] * terms["committed_rate"]).quantize(
        unit, ROUND_HALF_UP)
    return -(committed * percent / 100).quantize(unit, ROUND_HALF_UP)


def cost(terms: dict, used: Decimal, currency: str) -> Decimal:
    """C * r_c + max(0, U - C) * r_o, each line rounded half-up to the currency's minor
    unit."""
    unit = MINOR_UNIT[currency]
    committed = (terms["committed_gpu_hours"] * terms["committed_rate"]).quantize(
        unit, ROUND_HALF_UP)
    overage = (max(D(0), used - terms["committed_gpu_hours"]) * terms["overage_rate"]).quantize(
        unit, ROUND_HALF_UP)
    return committed + overage


@dataclass
class ModelContract:
    """What the test itself knows of a contract: its start, zone, term and amendments."""

    pk: int
    tenant: str
    starts_on: date
    zone: str
    term: int
    amendments: list[tuple[int, dict]] = field(default_factory=list)  # (from period, changes)

    def bounds(self) -> list[tuple[datetime, datetime]]:
        return [(midnight(months_later(self.starts_on, k), self.zone),
                 midnight(months_later(self.starts_on, k + 1), self.zone))
                for k in range(self.term)]

    def terms(self, index: int) -> dict:
        terms = dict(TERMS0)
        for start, changes in sorted(self.amendments, key=lambda a: a[0]):
            if start <= index:
                terms |= changes
        return terms


@dataclass
class Sample:
    ts: datetime
    namespace: str | None
    tenant: str | None


# Hours spread evenly over the contracts' terms and three months after them (integers() would
# favour the first hours), and how far back a report reaches.
HOURS = st.sampled_from(range(0, 4500, 7))
BACK = st.sampled_from(range(0, 900, 3))
USAGE = st.tuples(st.just("usage"), HOURS, BACK, st.sampled_from(range(1, 80)), st.integers(1, 2),
                  st.sampled_from(NAMESPACES))
# A job that waited: reported at the hour, submitted `back` hours before, waiting `hours`
# (started then, or at the report), of GPUs, whose team, and whether it waited for room.
WAIT = st.tuples(st.just("wait"), HOURS, BACK, st.sampled_from(range(1, 200, 3)),
                 st.integers(1, 3), st.sampled_from(["vision", "speech"]), st.booleans())
# A move of the usage one earlier report sent (its owner's, or no tenant's) to a tenant.
MOVE = st.tuples(st.just("move"), HOURS, st.integers(0, 30),
                 st.sampled_from(["vision", "speech"]))
actions = st.lists(st.one_of(
    USAGE, USAGE, USAGE,
    st.tuples(st.just("resend"), HOURS),
    st.tuples(st.just("amend"), HOURS, st.integers(0, 2),
              st.sampled_from(["committed_gpu_hours", "committed_rate", "overage_rate",
                               "base_quota_gpus", "max_quota_gpus"]),
              st.sampled_from(["0", "1", "2", "60", "150", "8.5", "11", "13.3333", "20"]),
              st.integers(0, 2)),
    st.tuples(st.just("terminate"), HOURS, st.integers(0, 2)),
    st.tuples(st.just("plan"), HOURS),
    MOVE, MOVE, WAIT, WAIT,
), min_size=8, max_size=24)


class World:
    """The database and the model side by side; each action runs on both."""

    def __init__(self, zone_a: str, term_a: int, zone_b: str, term_b: int,
                 currency: str = "CNY", fee: Decimal = Decimal(0)):
        self.currency, self.fee = currency, fee
        self.plan = Plan.objects.create(name="P", base_quota_gpus=1, max_quota_gpus=3,
                                        committed_gpu_hours=D(30), committed_rate=D(10),
                                        overage_rate=D(12), term_months=term_a,
                                        currency=currency, upfront_fee=fee,
                                        guarantee_pct=D(95), credit_tiers=TIERS)
        self.tenants = {slug: Tenant.objects.create(slug=slug, name=slug)
                        for slug in ("vision", "speech")}
        for tenant in self.tenants.values():
            attribute(tenant)
        self.contracts: list[ModelContract] = []
        a = self.sign("vision", date(2026, 1, 1), zone_a, term_a)
        # The renewal starts on the first local day of its zone that begins at or after the
        # first contract's end: back to back in instants, whatever the zones.
        end_a = a.bounds()[-1][1]
        day = end_a.astimezone(ZoneInfo(zone_b)).date() - timedelta(days=1)
        while midnight(day, zone_b) < end_a:
            day += timedelta(days=1)
        self.sign("vision", day, zone_b, term_b)
        self.sign("speech", date(2026, 1, 1), "UTC", 6)
        self.samples: list[Sample] = []
        self.waits: list[tuple[str, datetime, datetime, int, bool]] = []
        self.cluster = Cluster.objects.get(pk=default_cluster())
        self.batches: list[tuple[datetime, str | None, datetime, int, int, str]] = []
        self.written: dict[str, tuple] = {}

    def sign(self, tenant: str, starts_on: date, zone: str, term: int) -> ModelContract:
        contract = Contract(tenant=self.tenants[tenant], plan=self.plan, starts_on=starts_on,
                            time_zone=zone, term_months=term, status=Contract.Status.ACTIVE)
        contract.full_clean()
        contract.save()
        model = ModelContract(contract.pk, tenant, starts_on, zone, term)
        self.contracts.append(model)
        return model

    def usage(self, now, back, hours, gpus, namespace, prefix):
        # Reports reach back at most to the first contracts' start (earlier ones bill nothing).
        back = min(back, max(0, (now - T0) // HOUR - hours))
        first = (now - timedelta(hours=back + hours)).replace(minute=0, second=0, microsecond=0)
        meter(namespace, first, hours, gpus=gpus, at=now, gpu_prefix=prefix)
        self.batches.append((now, namespace, first, hours, gpus, prefix))
        tenant = namespace  # each namespace has a rule for the tenant of that slug
        self.samples += [Sample(first + k * HOUR, namespace, tenant)
                         for k in range(hours) for _g in range(gpus)]

    def wait(self, now, back, hours, gpus, namespace, room):
        """A job of `namespace`'s reported by the scheduler at `now` (perhaps after the
        statement of the period it waited in)."""
        hour = now.replace(minute=0, second=0, microsecond=0)
        submitted = max(T0, hour - back * HOUR)
        started = min(submitted + hours * HOUR, hour)
        if started <= submitted:
            return
        key = f"job-{len(self.waits)}"
        waits.store(self.cluster, "slurm", [waits.Seen(
            key=key, name=key, gpus=gpus, submitted=submitted, eligible=submitted,
            started=started, ended=None, reason="Resources" if room else "Dependency",
            capacity=room, namespace=namespace)], now)
        self.waits.append((namespace, submitted, started, gpus, room))

    def short_hours(self, tenant: str, start: datetime, end: datetime, base: int) -> int:
        """Hours of [start, end) in which the tenant's jobs waited for room while it held
        less than its base quota (every sample and wait here is in whole hours)."""
        short, hour = 0, start
        while hour < end:
            waiting = sum(g for who, a, b, g, room in self.waits
                          if who == tenant and room and a <= hour < b)
            held = sum(1 for s in self.samples if s.tenant == tenant and s.ts == hour)
            short += min(waiting, base - held) > 0
            hour += HOUR
        return short

    def resend(self, now, k):
        if self.batches:
            _then, namespace, first, hours, gpus, prefix = self.batches[k % len(self.batches)]
            meter(namespace, first, hours, gpus=gpus, at=max(now, first + hours * HOUR),
                  gpu_prefix=prefix)  # all duplicates: nothing new is counted

    def amend(self, now, which, name, value, ahead):
        model = self.contracts[which % 3]
        contract = Contract.objects.get(pk=model.pk)
        stated = Statement.objects.filter(contract=contract, kind="period").count()
        try:
            amendment = amend(contract=contract, changes={name: value},
                              from_period=stated + ahead, reason="test", now=now)
        except ValidationError:
            return
        model.amendments.append((amendment.from_period, {
            n: (int(new) if n.endswith("gpus") else D(new))
            for n, (_old, new) in amendment.changes.items()}))

    def terminate(self, now, which):
        model = self.contracts[which % 3]
        try:
            amendment = terminate(contract=Contract.objects.get(pk=model.pk), reason="test",
                                  now=now)
        except ValidationError:
            return
        model.term = int(amendment.changes["term_months"][1])

    def edit_plan(self):
        Plan.objects.filter(pk=self.plan.pk).update(committed_rate=D(30), overage_rate=D(50),
                                                    committed_gpu_hours=D(7), term_months=9)

    def move(self, now, which, to):
        if not self.batches:
            return
        _then, namespace, start, hours, _gpus, _prefix = self.batches[which % len(self.batches)]
        end = start + hours * HOUR
        scope = "namespace" if namespace else "unattributed"
        try:
            reattribute(scope=scope, value=namespace or "", start=start, end=end,
                        tenant_id=self.tenants[to].pk, reason="test", now=now)
        except ValidationError:
            return
        for sample in self.samples:
            matches = (sample.namespace == namespace if namespace else sample.tenant is None)
            if matches and start <= sample.ts < end:
                sample.tenant = to

    def close(self, now):
        close_due_periods(now)
        self.remember_what_was_written()

    def remember_what_was_written(self):
        """Every statement and line as first seen; later sightings must be identical."""
        rows = [("s", s) for s in Statement.objects.values_list()] + [
            ("c", c) for c in CorrectionLine.objects.values_list()]
        for kind, row in rows:
            key = f"{kind}{row[0]}"
            assert self.written.setdefault(key, row) == row, f"{key} was rewritten"


def run(world: World, history: list) -> None:
    """The actions in time order; before each, the period close runs as beat runs it (so what
    arrives for a period already stated is late)."""
    for number, action in enumerate(sorted(history, key=lambda a: a[1])):
        kind, hour = action[0], action[1]
        now = T0 + timedelta(hours=hour, minutes=7)
        with time_machine.travel(now, tick=False):
            world.close(now)
            if kind == "usage":
                world.usage(now, *action[2:], prefix=f"GPU{number}")
            elif kind == "resend":
                world.resend(now, action[1])
            elif kind == "amend":
                world.amend(now, *action[2:])
            elif kind == "terminate":
                world.terminate(now, action[2])
            elif kind == "plan":
                world.edit_plan()
            elif kind == "wait":
                world.wait(now, *action[2:])
            else:
                world.move(now, *action[2:])
    # Long after everything: every period and every correction is stated.
    end = T0 + timedelta(days=400)
    with time_machine.travel(end, tick=False):
        world.close(end)
        world.close(end + timedelta(days=40))


def check(world: World) -> None:
    windows: dict[str, list] = {}
    for model in world.contracts:
        contract = Contract.objects.get(pk=model.pk)
        assert contract.status == Contract.Status.ENDED
        assert contract.term_months == model.term
        statements = list(Statement.objects.filter(contract=contract))
        lines = list(CorrectionLine.objects.filter(statement__contract=contract))
        want_money = world.fee  # signed with the plan's fee, billed once
        for index, (start, end) in enumerate(model.bounds()):
            used = D(sum(1 for s in world.samples
                         if s.tenant == model.tenant and start <= s.ts < end))
            terms = model.terms(index)
            [stated] = [s for s in statements if s.kind == "period" and s.period_index == index]
            assert (stated.period_start, stated.period_end) == (start, end)
            billed = stated.allocated_gpu_hours + sum(
                (c.gpu_hours for c in lines if c.period_index == index), D(0))
            assert billed == used, (model.pk, index)  # every hour billed once
            assert (stated.committed_gpu_hours, stated.committed_rate, stated.overage_rate) == (
                terms["committed_gpu_hours"], terms["committed_rate"], terms["overage_rate"])
            want_money += cost(terms, used, world.currency)
            hours = int((end - start) / HOUR)
            want_money += credit(terms, world.short_hours(model.tenant, start, end,
                                                          terms["base_quota_gpus"]),
                                 hours, world.currency)
        assert sum((s.total_cost for s in statements), D(0)) == want_money, model.pk
        assert not [s for s in statements if s.kind == "period" and s.period_index >= model.term]
        windows.setdefault(model.tenant, []).append((contract.window_start, contract.window_end))
    for spans in windows.values():  # no hour can be billed to two contracts
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def note_coverage(world: World) -> None:
    """What each history exercised (pytest --hypothesis-show-statistics lists the shares)."""
    lines = CorrectionLine.objects
    event(f"correction lines: {lines.exists()}")
    event(f"a correction with money: {lines.exclude(amount=0).exists()}")
    event(f"a negative correction: {lines.filter(gpu_hours__lt=0).exists()}")
    event(f"a corrections statement: {Statement.objects.filter(kind='corrections').exists()}")
    event(f"amendments: {sum(len(m.amendments) for m in world.contracts)}")
    event(f"terminated: {Contract.objects.filter(amendments__kind='termination').exists()}")
    event(f"a credit: {Statement.objects.filter(credit__lt=0).exists()}")
    corrected = lines.exclude(credit_after_cost=F("credit_before_cost")).exists()
    event(f"a credit corrected: {corrected}")


@pytest.mark.django_db
@settings(max_examples=examples(80), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(zone_a=st.sampled_from(ZONES), term_a=st.integers(1, 3), zone_b=st.sampled_from(ZONES),
       term_b=st.integers(1, 2), history=actions, currency=st.sampled_from(sorted(MINOR_UNIT)),
       fee=st.sampled_from([D(0), D(500), D(1234)]))
def test_random_histories_bill_every_hour_once_at_its_own_period_s_price(
        zone_a, term_a, zone_b, term_b, history, currency, fee):
    forget_gpus()
    partitions.forget()
    with override_settings(RAW_RETENTION_DAYS=3650), transaction.atomic():
        world = World(zone_a, term_a, zone_b, term_b, currency, fee)
        run(world, history)
        note_coverage(world)
        check(world)
        transaction.set_rollback(True)
    forget_gpus()
    partitions.forget()
