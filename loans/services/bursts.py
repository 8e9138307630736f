"""Burst requests, the GPU pools they draw on, and the queue.

A pool is the devices of one GPU model that reported within the capacity window
(CAPACITY_WINDOW_HOURS), a MIG instance or time-sliced replica as its share of a GPU. Its room
at a moment is its GPUs less the base quotas guaranteed then to the active contracts of that
model, less the bursts granted on it then. A request is granted at once when the contract's base
plus its bursts stay within its max quota, the pool has room for the whole window, and the fleet
keeps room for the guarantees of contracts of any model; otherwise it queues, served by priority
(lower first, as for attribution rules) then first come, and the queue job grants it as soon as
it fits. A contract of any model draws on the pool with most room, and its grant is recorded
against that pool. A burst lies inside its contract's window. Every decision happens under one
lock, so two requests racing for the last GPUs cannot both win.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q, Sum
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from core.wording import Wording, worded
from loans.maths.capacity import Guarantee, guaranteed_by_hour, guaranteed_gpus, peak
from loans.models import BurstEvent, BurstRequest, Contract
from loans.services.alerts.notify import notify_later
from metering.usage import fleet

MAX_GPUS = 100_000  # what one request may ask for, a sanity bound for forms and the API
State = BurstRequest.State
LIVE = [State.QUEUED, State.GRANTED]
ANY = ""  # the GPU model of a plan for any model
HOUR = timedelta(hours=1)


class BurstError(ValueError):
    """A request or decision that cannot be; the message says why."""


def pool_of(contract: Contract) -> str:
    """The GPU model a contract's bursts draw on (ANY: the pool with most room)."""
    return contract.gpu_model


def window() -> timedelta:
    return timedelta(hours=settings.CAPACITY_WINDOW_HOURS)


def physical_gpus(now: datetime) -> dict[str, float]:
    """GPUs of each model that reported within the capacity window, as shares of a GPU."""
    return fleet.gpus_by_model(now - window())


def guarantees(active: list[Contract] | None = None) -> dict[str, list[Guarantee]]:
    """The base quota of every period of every active contract (read here, or the caller's
    `active`, with their amendments), by GPU model (ANY for plans of any model): what each
    pool, or the fleet, owes before any burst."""
    if active is None:
        active = Contract.objects.filter(status=Contract.Status.ACTIVE).prefetch_related(
            "amendments")
    out: dict[str, list[Guarantee]] = {}
    for contract in active:
        out.setdefault(contract.gpu_model, []).extend(
            (p.start, p.end, terms.base_quota_gpus)
            for p, terms in zip(contract.periods(), contract.terms_by_period(), strict=True))
    return out


def granted_on(pool: str | None, start: datetime, end: datetime, exclude: int | None = None):
    """Bursts granted over [start, end), on one pool (None: on any)."""
    bursts = BurstRequest.objects.filter(state=State.GRANTED, starts_at__lt=end,
                                         ends_at__gt=start).exclude(pk=exclude)
    return list(bursts if pool is None else bursts.filter(pool=pool))


def _spans(bursts) -> list[tuple[datetime, datetime, int]]:
    return [(b.starts_at, b.ends_at, b.gpus) for b in bursts]


@dataclass(frozen=True)
class Pools:
    """The fleet apart from bursts: it does not change while decisions are locked."""

    physical: dict[str, float]
    owed: dict[str, list[Guarantee]]


def capacity(now: datetime) -> Pools:
    return Pools(physical_gpus(now), guarantees())


@dataclass(frozen=True)
class Fit:
    within_cap: bool
    pool: str  # where it would go
    pool_room: float  # the pool's free GPUs over the window
    fleet_room: float  # the fleet's, the guarantees of any model's contracts included

    def fits(self, gpus: int) -> bool:
        return self.within_cap and min(self.pool_room, self.fleet_room) >= gpus


def fit(request: BurstRequest, fleet: Pools | None = None, now: datetime | None = None
        ) -> Fit:
    contract, start, end = request.contract, request.starts_at, request.ends_at
    fleet = fleet or capacity(now or start)
    terms = contract.terms_at(start)
    others = granted_on(None, start, end, exclude=request.pk)
    own = peak(_spans(b for b in others if b.contract_id == contract.pk))
    within_cap = terms.base_quota_gpus + own + request.gpus <= terms.max_quota_gpus

    def room(pool: str) -> float:
        return (fleet.physical.get(pool, 0.0)
                - guaranteed_gpus(fleet.owed.get(pool, []), start, end)
                - peak(_spans(b for b in others if b.pool == pool)))

    pools = [pool_of(contract)] if pool_of(contract) != ANY else sorted(fleet.physical)
    best = max(pools, key=lambda p: (room(p), p), default=ANY)
    fleet_room = (sum(fleet.physical.values())
                  - sum(guaranteed_gpus(owed, start, end) for owed in fleet.owed.values())
                  - peak(_spans(others)))
    return Fit(within_cap, best, room(best) if pools else 0.0, fleet_room)


def _lock() -> None:
    """Serialise burst decisions (a plan of any model may draw on any pool). SQLite's write
    transactions are already serial."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext('burst-pools'))")


def _event(request: BurstRequest, now: datetime, note: Wording | str, actor=None,
           state: str | None = None) -> None:
    """A line of the request's history: the job's words kept to be said in the reader's
    language (core.wording), an operator's as typed."""
    english, stored = _note(note)
    BurstEvent.objects.create(request=request, at=now, state=state or request.state,
                              actor=actor, note=english, wording=stored)


def _note(note: Wording | str) -> tuple[str, dict]:
    if isinstance(note, Wording):
        return note.english[:500], note.stored()
    return note[:500], {}


def _move(request: BurstRequest, state: str, now: datetime, actor=None,
          note: Wording | str = "", pool: str | None = None) -> None:

    request.state, request.decided_at = state, now
    english, stored = _note(note)
    if english:
        request.note, request.wording = english, stored
    if pool is not None:
        request.pool = pool
    request.save(update_fields=["state", "decided_at", "note", "wording", "pool"])
    _event(request, now, note, actor=actor, state=state)
    note = english
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


SUBMISSION_MAX = 64  # characters of a submission key


def valid_submission(key: str) -> bool:
    """A submission key submit() takes: empty (none), or up to SUBMISSION_MAX printable ASCII
    characters."""
    return len(key) <= SUBMISSION_MAX and key.isascii() and (not key or key.isprintable())


def submit(*, contract: Contract, user, gpus: int, starts_at: datetime, ends_at: datetime,
           reason: str, now: datetime, submission: str = "") -> BurstRequest:
    """Record a request; grant it now if it fits, queue it if it may fit later, reject it if
    it can never fit the contract's max quota. A `submission` key already used for this
    contract (a form sent twice, an API call retried) gets that request back as it is now,
    with `repeated` set, and nothing new is asked for."""
    if not valid_submission(submission):
        raise BurstError(_("A submission key is at most %(n)s printable ASCII characters.")
                         % {"n": SUBMISSION_MAX})
    earlier = _submitted(contract, submission)
    if earlier is not None:  # answered as it was, even once its window is over
        return earlier
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
    if ends_at > contract.window_end or starts_at < contract.window_start:
        raise BurstError(_("A burst lies inside its contract, which is in force from %(start)s "
                           "until %(end)s.") % {
            "start": f"{contract.window_start:%Y-%m-%d %H:%M %Z}",
            "end": f"{contract.window_end:%Y-%m-%d %H:%M %Z}"})
    terms = contract.terms_at(max(starts_at, now))
    with transaction.atomic():
        _lock()
        earlier = _submitted(contract, submission)  # again, under the lock: a race
        if earlier is not None:
            return earlier
        request = BurstRequest.objects.create(
            contract=contract, gpus=gpus, starts_at=max(starts_at, now), ends_at=ends_at,
            reason=reason.strip()[:500], requested_by=user, created_at=now,
            submission=submission)
        request.repeated = False
        _event(request, now, worded(gettext_noop("requested")), actor=user)
        placed = fit(request, now=now)
        if terms.base_quota_gpus + gpus > terms.max_quota_gpus:
            _move(request, State.REJECTED, now, note=worded(gettext_noop(
                "%(base)s base + %(gpus)s GPUs is over the max quota of %(cap)s."), {
                "base": terms.base_quota_gpus, "gpus": gpus, "cap": terms.max_quota_gpus}))
        elif placed.fits(gpus) and not _queued_ahead(request):
            _move(request, State.GRANTED, now,
                  note=worded(gettext_noop("granted: the pool had room")),
                  pool=placed.pool)
    return request


def _submitted(contract: Contract, submission: str) -> BurstRequest | None:
    if not submission:
        return None
    earlier = BurstRequest.objects.filter(contract=contract, submission=submission).first()
    if earlier is not None:
        earlier.repeated = True
    return earlier


def _queued_ahead(request: BurstRequest) -> bool:
    """Someone of the same queue waits before this request (by priority, lower first, then
    first come, first served)."""
    return BurstRequest.objects.filter(
        state=State.QUEUED, contract__gpu_model=pool_of(request.contract)
    ).filter(Q(priority__lt=request.priority)
             | Q(priority=request.priority, created_at__lt=request.created_at)
             | Q(priority=request.priority, created_at=request.created_at, pk__lt=request.pk)
             ).exists()


@dataclass(frozen=True)
class QueueRun:
    granted: int
    expired: int


def process_queue(now: datetime) -> QueueRun:
    """Grant queued requests as they fit, in order, queue by queue (one for each GPU model,
    one for plans of any model); expire those whose window passed while they waited. The head
    of a queue blocks the rest (first come, first served), unless it can never fit the cap."""
    granted = expired = 0
    with transaction.atomic():
        _lock()
        fleet = capacity(now)
        queued = BurstRequest.objects.filter(state=State.QUEUED).select_related(
            "contract__plan", "contract__tenant").prefetch_related("contract__amendments")
        blocked: set[str] = set()
        for request in queued:
            queue = pool_of(request.contract)
            if request.ends_at <= now:
                _move(request, State.EXPIRED, now,
                      note=worded(gettext_noop("the window passed in the queue")))
                expired += 1
                continue
            if queue in blocked:
                continue
            placed = fit(request, fleet)
            if placed.fits(request.gpus):
                _move(request, State.GRANTED, now,
                      note=worded(gettext_noop("granted: GPUs came free")),
                      pool=placed.pool)
                granted += 1
            elif placed.within_cap:
                blocked.add(queue)
    return QueueRun(granted, expired)


def decide(request: BurstRequest, action: str, *, actor, now: datetime, note: str = "",
           priority: int | None = None) -> BurstRequest:
    """What people do to a request: a lead cancels; an operator approves (grants it within
    the cap where the pool has the GPUs), rejects, revokes a grant, or sets its priority."""
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
        _lock()
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
            _event(request, now, worded(gettext_noop("priority set to %(p)s"), {"p": priority}),
                   actor=actor)
            return request
        placed = fit(request, now=now)
        if action == "approve" and not placed.within_cap:
            raise BurstError(_("Granting it would take the contract over its max quota."))
        room = int(min(placed.pool_room, placed.fleet_room))
        if action == "approve" and room < request.gpus:
            # Every path (the page, the API, the admin) alike: a grant the GPUs cannot hold
            # would promise GPUs nobody has; it stays queued and is granted once they free up.
            raise BurstError(_("Not granted: %(pool)s has %(free)s GPUs free over the window "
                               "and this request asks for %(gpus)s. It stays queued and is "
                               "granted once GPUs free up.") % {
                "pool": placed.pool, "free": max(0, room), "gpus": request.gpus})
        _move(request, target, now, actor=actor, note=note,
              pool=placed.pool if action == "approve" else None)
    return request


def clip_to_contract(contract: Contract, now: datetime) -> int:
    """After a contract's end moved earlier (a termination): its live bursts end with it, and
    those that would start after it are withdrawn. Returns how many changed."""
    changed = 0
    with transaction.atomic():
        _lock()
        for request in BurstRequest.objects.filter(
                contract=contract, state__in=LIVE, ends_at__gt=contract.window_end):
            if request.starts_at >= contract.window_end:
                state = State.REVOKED if request.state == State.GRANTED else State.REJECTED
                _move(request, state, now, note=worded(gettext_noop(
                    "the contract ends before this burst starts")))
            else:
                request.ends_at = contract.window_end
                request.save(update_fields=["ends_at"])
                _event(request, now, worded(gettext_noop(
                    "shortened to the contract's end, %(end)s"), {
                    "end": f"{contract.window_end:%Y-%m-%d %H:%M %Z}"}))
            changed += 1
    return changed


def effective_quota(contract: Contract, at: datetime) -> tuple[int, int]:
    """(base plus the bursts granted at `at`, never past the max quota; the max quota), with
    the terms in force then: the one quota every scheduler carries (manifests, slurm_limits).
    An amendment that lowers the cap under a burst granted earlier cuts the burst there."""
    terms = contract.terms_at(at)
    extra = BurstRequest.objects.filter(
        contract=contract, state=State.GRANTED, starts_at__lte=at, ends_at__gt=at
    ).aggregate(n=Sum("gpus"))["n"] or 0
    return min(terms.base_quota_gpus + extra, terms.max_quota_gpus), terms.max_quota_gpus


def pool_series(model: str, start: datetime, end: datetime, fleet: Pools | None = None
                ) -> dict:
    """A pool hour by hour: its GPUs, the base quotas guaranteed on it, the bursts granted on
    it (plans of any model included, where they were placed) and its free GPUs. `fleet` is
    capacity(start), where the caller has it."""
    fleet = fleet or capacity(start)
    physical = fleet.physical.get(model, 0.0)
    bursts = granted_on(model, start, end)
    first = start.replace(minute=0, second=0, microsecond=0)
    hours, hour = [], first
    while hour < end:
        hours.append(hour)
        hour += timedelta(hours=1)
    # Only the periods in the window, once, not the whole terms for every hour.
    owed = [g for g in fleet.owed.get(model, []) if g[0] < end and g[1] > first]
    guaranteed = guaranteed_by_hour(owed, hours)
    granted = [sum(b.gpus for b in bursts if b.starts_at < h + timedelta(hours=1)
                   and b.ends_at > h) for h in hours]
    free = [max(0.0, physical - g - b) for g, b in zip(guaranteed, granted, strict=True)]
    return {"hours": hours, "physical": physical, "guaranteed": guaranteed, "granted": granted,
            "free": free}
