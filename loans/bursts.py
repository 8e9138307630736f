"""Burst requests, the GPU pool they draw on, and the queue.

The pool of a GPU model is its physical GPUs less the base quotas guaranteed to every active
contract on that model, less the bursts already granted at the same time. A request is granted
at once when the contract's base plus its bursts stay within its max quota and the pool has
room for the whole window; otherwise it queues, served by priority then first come, and the
queue job grants it as soon as it fits. Every decision on one pool happens under one lock, so
two requests racing for the last GPUs cannot both win.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q, Sum
from django.utils.translation import gettext as _

from loans.models import BurstEvent, BurstRequest, Contract
from metering.models import Gpu

MAX_GPUS = 100_000  # what one request may ask for, a sanity bound for forms and the API
State = BurstRequest.State
LIVE = [State.QUEUED, State.GRANTED]


class BurstError(ValueError):
    """A request or decision that cannot be; the message says why."""


def pool_of(contract: Contract) -> str:
    """The GPU model a contract's bursts draw on ("" for plans of any model)."""
    return contract.plan.gpu_model


def physical_gpus(model: str) -> int:
    gpus = Gpu.objects.all() if not model else Gpu.objects.filter(model=model)
    return gpus.count()


def guarantees(model: str) -> list[tuple[datetime, datetime, int]]:
    """(start, end, base quota) of every active contract on this model."""
    out = []
    for contract in Contract.objects.filter(
            status=Contract.Status.ACTIVE, plan__gpu_model=model).select_related("plan"):
        periods = contract.periods()
        if periods:
            out.append((periods[0].start, periods[-1].end, contract.terms().base_quota_gpus))
    return out


def guaranteed_gpus(model: str, start: datetime, end: datetime, terms=None) -> int:
    """Base quotas of the active contracts on this model that run in [start, end)."""
    if terms is None:
        terms = guarantees(model)
    return sum(base for first, last, base in terms if first < end and last > start)


def peak_granted(bursts, start: datetime, end: datetime) -> int:
    """The most GPUs these granted bursts hold at one moment of [start, end)."""
    edges = []
    for burst in bursts:
        if burst.starts_at < end and burst.ends_at > start:
            edges += [(max(burst.starts_at, start), burst.gpus), (min(burst.ends_at, end),
                                                                  -burst.gpus)]
    peak = held = 0
    for _moment, change in sorted(edges, key=lambda e: (e[0], e[1])):  # ends before starts
        held += change
        peak = max(peak, held)
    return peak


def granted_on(model: str, start: datetime, end: datetime, exclude: int | None = None):
    return list(BurstRequest.objects.filter(
        state=State.GRANTED, contract__plan__gpu_model=model, starts_at__lt=end,
        ends_at__gt=start).exclude(pk=exclude))


@dataclass(frozen=True)
class Fit:
    within_cap: bool
    pool_room: int

    def fits(self, gpus: int) -> bool:
        return self.within_cap and self.pool_room >= gpus


@dataclass(frozen=True)
class Capacity:
    """What a pool holds apart from bursts: it does not change while the pool is locked."""

    physical: int
    guarantees: list[tuple[datetime, datetime, int]]


def capacity(model: str) -> Capacity:
    return Capacity(physical_gpus(model), guarantees(model))


def fit(request: BurstRequest, pool: Capacity | None = None) -> Fit:
    contract, start, end = request.contract, request.starts_at, request.ends_at
    terms = contract.terms()
    model = pool_of(contract)
    pool = pool or capacity(model)
    others = granted_on(model, start, end, exclude=request.pk)
    own = peak_granted([b for b in others if b.contract_id == contract.pk], start, end)
    room = (pool.physical - guaranteed_gpus(model, start, end, pool.guarantees)
            - peak_granted(others, start, end))
    return Fit(terms.base_quota_gpus + own + request.gpus <= terms.max_quota_gpus, room)


def _lock(model: str) -> None:
    """Serialise decisions on one pool. SQLite's write transactions are already serial."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"burst-pool:{model}"])


def _move(request: BurstRequest, state: str, now: datetime, actor=None, note: str = "") -> None:
    from loans.notify import notify_later

    request.state, request.decided_at = state, now
    if note:
        request.note = note[:500]
    request.save(update_fields=["state", "decided_at", "note"])
    BurstEvent.objects.create(request=request, at=now, state=state, actor=actor, note=note[:500])
    tenant = request.contract.tenant
    text = _("Burst request for %(gpus)s GPUs from %(start)s to %(end)s: %(state)s. %(note)s") % {
        "gpus": request.gpus, "start": f"{request.starts_at:%Y-%m-%d %H:%M %Z}",
        "end": f"{request.ends_at:%Y-%m-%d %H:%M %Z}", "state": request.get_state_display(),
        "note": note}
    notify_later(tenant, f"[gpuloans] {tenant.name}: burst {state}", text, {
        "event": f"burst.{state}", "burst": payload(request)})


def payload(request: BurstRequest) -> dict:
    return {"id": request.pk, "tenant": request.contract.tenant.slug,
            "contract": request.contract_id, "gpus": request.gpus,
            "starts_at": request.starts_at.isoformat(), "ends_at": request.ends_at.isoformat(),
            "state": request.state, "priority": request.priority, "reason": request.reason,
            "note": request.note}


def submit(*, contract: Contract, user, gpus: int, starts_at: datetime, ends_at: datetime,
           reason: str, now: datetime) -> BurstRequest:
    """Record a request; grant it now if it fits, queue it if it may fit later, reject it if
    it can never fit the contract's max quota."""
    terms = contract.terms()
    if gpus < 1:
        raise BurstError(_("Ask for at least one GPU."))
    if ends_at <= starts_at:
        raise BurstError(_("The end must be after the start."))
    if ends_at <= now:
        raise BurstError(_("This window is already over."))
    if ends_at - starts_at > timedelta(days=settings.BURST_MAX_DAYS):
        raise BurstError(_("A burst lasts at most %(days)s days.") % {
            "days": settings.BURST_MAX_DAYS})
    if contract.status != Contract.Status.ACTIVE:
        raise BurstError(_("Only an active contract can burst."))
    with transaction.atomic():
        _lock(pool_of(contract))
        request = BurstRequest.objects.create(
            contract=contract, gpus=gpus, starts_at=max(starts_at, now), ends_at=ends_at,
            reason=reason.strip()[:500], requested_by=user, created_at=now)
        BurstEvent.objects.create(request=request, at=now, state=State.QUEUED, actor=user,
                                  note=_("requested"))
        if terms.base_quota_gpus + gpus > terms.max_quota_gpus:
            _move(request, State.REJECTED, now, note=_(
                "%(base)s base + %(gpus)s GPUs is over the max quota of %(cap)s.") % {
                "base": terms.base_quota_gpus, "gpus": gpus, "cap": terms.max_quota_gpus})
        elif fit(request).fits(gpus) and not _queued_ahead(request):
            _move(request, State.GRANTED, now, note=_("granted: the pool had room"))
    return request


def _queued_ahead(request: BurstRequest) -> bool:
    """Someone of the same pool waits before this request (first come, first served)."""
    return BurstRequest.objects.filter(
        state=State.QUEUED, contract__plan__gpu_model=pool_of(request.contract)
    ).filter(Q(priority__gt=request.priority)
             | Q(priority=request.priority, created_at__lt=request.created_at)
             | Q(priority=request.priority, created_at=request.created_at, pk__lt=request.pk)
             ).exists()


@dataclass(frozen=True)
class QueueRun:
    granted: int
    expired: int


def process_queue(now: datetime) -> QueueRun:
    """Grant queued requests as they fit, in order, pool by pool; expire those whose window
    passed while they waited. The head of a pool's queue blocks the rest (first come, first
    served), unless it can never fit the cap."""
    granted = expired = 0
    models = set(BurstRequest.objects.filter(state=State.QUEUED).values_list(
        "contract__plan__gpu_model", flat=True))
    for model in sorted(models):
        with transaction.atomic():
            _lock(model)
            queue = BurstRequest.objects.filter(
                state=State.QUEUED, contract__plan__gpu_model=model).select_related(
                "contract__plan", "contract__tenant")
            pool = capacity(model)
            for request in queue:
                if request.ends_at <= now:
                    _move(request, State.EXPIRED, now, note=_("the window passed in the queue"))
                    expired += 1
                    continue
                placed = fit(request, pool)
                if placed.fits(request.gpus):
                    _move(request, State.GRANTED, now, note=_("granted: GPUs came free"))
                    granted += 1
                elif placed.within_cap:
                    break
    return QueueRun(granted, expired)


def decide(request: BurstRequest, action: str, *, actor, now: datetime, note: str = "",
           priority: int | None = None) -> BurstRequest:
    """What people do to a request: a lead cancels; an operator approves (grants it within
    the cap, pool or not), rejects, revokes a grant, or sets its priority."""
    allowed = {
        "cancel": ([State.QUEUED, State.GRANTED], State.CANCELLED),
        "approve": ([State.QUEUED], State.GRANTED),
        "reject": ([State.QUEUED], State.REJECTED),
        "revoke": ([State.GRANTED], State.REVOKED),
        "prioritise": ([State.QUEUED], State.QUEUED),
    }
    if action not in allowed:
        raise BurstError(_("Unknown action %(action)s.") % {"action": action[:20]})
    sources, target = allowed[action]
    with transaction.atomic():
        _lock(pool_of(request.contract))
        request = BurstRequest.objects.select_related("contract__plan", "contract__tenant").get(
            pk=request.pk)
        if request.state not in sources:
            raise BurstError(_("This request is %(state)s; it cannot be %(action)s.") % {
                "state": request.get_state_display(), "action": action})
        if action == "prioritise":
            if priority is None:
                raise BurstError(_("Give a priority."))
            request.priority = priority
            request.save(update_fields=["priority"])
            BurstEvent.objects.create(request=request, at=now, state=request.state, actor=actor,
                                      note=_("priority set to %(p)s") % {"p": priority})
            return request
        if action == "approve" and not fit(request).within_cap:
            raise BurstError(_("Granting it would take the contract over its max quota."))
        _move(request, target, now, actor=actor, note=note)
    return request


def effective_quota(contract: Contract, at: datetime) -> tuple[int, int]:
    """(base plus the bursts granted at `at`, max quota)."""
    terms = contract.terms()
    extra = BurstRequest.objects.filter(
        contract=contract, state=State.GRANTED, starts_at__lte=at, ends_at__gt=at
    ).aggregate(n=Sum("gpus"))["n"] or 0
    return terms.base_quota_gpus + extra, terms.max_quota_gpus


def pool_series(model: str, start: datetime, end: datetime) -> dict:
    """The pool hour by hour: physical, guaranteed, granted bursts and free GPUs."""
    pool = capacity(model)
    bursts = granted_on(model, start, end)
    hours, hour = [], start.replace(minute=0, second=0, microsecond=0)
    while hour < end:
        hours.append(hour)
        hour += timedelta(hours=1)
    guaranteed = [guaranteed_gpus(model, h, h + timedelta(hours=1), pool.guarantees)
                  for h in hours]
    granted = [sum(b.gpus for b in bursts if b.starts_at < h + timedelta(hours=1)
                   and b.ends_at > h) for h in hours]
    free = [max(0, pool.physical - g - b) for g, b in zip(guaranteed, granted, strict=True)]
    return {"hours": hours, "physical": pool.physical, "guaranteed": guaranteed, "granted": granted,
            "free": free}
