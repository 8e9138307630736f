"""Alerts: find the conditions that hold now, open an alert for each new one, resolve those
that cleared. One open alert per kind and subject (a partial unique index backs it), so runs
twice or concurrently open nothing twice; each change is notified after it commits."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.translation import gettext_noop

from core.wording import Wording, worded
from loans.models import Alert, Contract, Tenant, policy_of
from loans.services.alerts import channels, guarantee
from loans.services.alerts.condition import Condition
from loans.services.alerts.notify import notify_alert
from loans.services.ledger import bills, dashboard, pooled
from metering.usage import fleet, floor_hour, slurm

THRESHOLDS = (100, 80, 50)  # percent of the commitment used; the highest crossed is open
IDLE_UTIL = 0.05
COMPLETE = 0.99
Kind = Alert.Kind


def _money(value: Decimal) -> str:
    return f"{value:,.2f}"


# The commitment-used alert by overage policy and stage (80%: near, 100%: spent): from 80%
# it says what the scheduler will do once the commitment is spent, at 100% what it does now
# (loans.schedulers.slurm.budgets, loans.schedulers.kubernetes.manifests).
COMMITMENT_USED = {
    ("allow", "early"): gettext_noop(
        "%(tenant)s has used %(used).0f%% of the %(committed)s GPU-h committed for "
        "period %(period)s."),
    ("allow", "spent"): gettext_noop(
        "%(tenant)s has used %(used).0f%% of the %(committed)s GPU-h committed for "
        "period %(period)s. Its overage policy is allow: jobs go on at the overage rate."),
    ("hold", "near"): gettext_noop(
        "%(tenant)s has used %(used).0f%% of the %(committed)s GPU-h committed for "
        "period %(period)s. Its overage policy is hold: once the commitment is spent, new jobs "
        "wait for the next period."),
    ("hold", "spent"): gettext_noop(
        "%(tenant)s has used %(used).0f%% of the %(committed)s GPU-h committed for "
        "period %(period)s. Its overage policy is hold: new jobs wait for the next period; "
        "running jobs finish."),
    ("budget", "near"): gettext_noop(
        "%(tenant)s has used %(used).0f%% of the %(committed)s GPU-h committed for "
        "period %(period)s. Past the commitment, jobs run at the overage rate until "
        "%(budget)s %(currency)s of overage is spent, then wait for the next period."),
    ("budget", "spent"): gettext_noop(
        "%(tenant)s has used %(used).0f%% of the %(committed)s GPU-h committed for "
        "period %(period)s. Jobs now run at the overage rate until %(budget)s %(currency)s of "
        "overage is spent, then wait for the next period."),
}
BUDGET_THRESHOLDS = (100, 80)  # percent of the overage budget spent
BUDGET_USED = {
    80: gettext_noop(
        "%(tenant)s has spent %(used).0f%% of its overage budget of %(budget)s %(currency)s "
        "for period %(period)s. Once it is spent, new jobs wait for the next period."),
    100: gettext_noop(
        "%(tenant)s has spent its overage budget of %(budget)s %(currency)s for period "
        "%(period)s (%(spent)s %(currency)s): new jobs wait for the next period; running jobs "
        "finish."),
}


def _stage(crossed: int) -> str:
    return "spent" if crossed >= 100 else "near" if crossed >= 80 else "early"


def commitment_wording(kind: str, crossed: int, values: dict) -> Wording:
    text = (COMMITMENT_USED.get((kind, _stage(crossed)))
            or COMMITMENT_USED[("allow", "early")])
    return worded(text, values)


def budget_condition(contract: Contract, subject: str, period: int, figures,
                     budget: Decimal | None) -> Condition | None:
    """The overage budget's alert at 80% and 100% spent, where the policy is a budget."""
    terms = figures.terms
    spent = terms.cost(figures.used_gpu_hours).overage_cost
    if budget is None or spent <= 0:
        return None
    share = spent / budget * 100 if budget > 0 else Decimal(100)
    crossed = next((t for t in BUDGET_THRESHOLDS if share >= t), None)
    if crossed is None:
        return None
    tenant = contract.tenant
    wording = worded(BUDGET_USED[crossed], {
        "tenant": tenant.name, "used": share, "budget": _money(budget), "spent": _money(spent),
        "currency": terms.currency, "period": period})
    return Condition(Kind.BUDGET_USED, f"{subject}:{crossed}", tenant.pk, wording,
                     {"threshold_percent": crossed, "overage_cost": str(spent),
                      "budget": str(budget)})


def contract_conditions(contract: Contract, now: datetime,
                        pools: list[pooled.Pool] | None = None) -> list[Condition]:
    """Commitment used, projected overage or unused, completeness: for the period running
    (with no commitment, C = 0: projected overage and completeness). The money is the
    period's projected bill (loans.services.ledger.bills): in a sharing group (`pools`: every
    group's now, where the caller read them), after sharing."""
    period = contract.period_at(now)
    if period is None:
        return []
    figures = dashboard.figures(contract, period, now)
    pool = next((p for p in (pooled.pools(now) if pools is None else pools)
                 if any(c.pk == contract.pk for c, _g in p.members)), None)
    bill = bills.projected(contract.pk, figures.terms, period,
                           figures.projected_used_gpu_hours, pool)
    committed, terms = figures.committed_gpu_hours, figures.terms
    out = []
    subject = f"contract:{contract.pk}:period:{period.index + 1}"
    tenant = contract.tenant
    # A contract committing nothing (pay as you go at the overage rate) has no share of a
    # commitment to cross, but its projected overage and its completeness are alerted alike.
    used = figures.used_gpu_hours / committed * 100 if committed > 0 else 0
    crossed = next((t for t in THRESHOLDS if used >= t), None) if committed > 0 else None
    kind, budget = policy_of(contract)
    if kind == "budget" and (spent := budget_condition(contract, subject, period.index + 1,
                                                       figures, budget)):
        out.append(spent)
    if crossed is not None:
        wording = commitment_wording(kind, crossed, {
            "tenant": tenant.name, "used": used, "committed": f"{committed:,.0f}",
            "period": period.index + 1, "budget": _money(budget or Decimal(0)),
            "currency": terms.currency})
        out.append(Condition(Kind.COMMITMENT_USED, f"{subject}:{crossed}", tenant.pk, wording,
            {"threshold_percent": crossed, "used_gpu_hours": str(figures.used_gpu_hours),
             "overage_policy": kind}))
    # Past the commitment raises the alert; the money is what the statement would bill at
    # the overage rate after sharing (a partner's unused hours may cover part or all).
    past = bill.past_commitment_gpu_hours
    if past > committed * settings.ALERT_OVERAGE_PERCENT / 100:
        cost, overage = bill.overage_cost, bill.overage_gpu_hours
        values = {"tenant": tenant.name, "hours": f"{past:,.0f}", "money": _money(cost),
                  "currency": terms.currency, "overage": f"{overage:,.0f}",
                  "borrowed": f"{bill.borrowed_gpu_hours:,.0f}"}
        wording = worded(gettext_noop(
            "At the last week's rate %(tenant)s will use %(hours)s GPU-h past its commitment "
            "this period; partners' commitments cover %(borrowed)s of them, and %(overage)s "
            "GPU-h at the overage rate cost %(money)s %(currency)s."), values) \
            if bill.borrowed_gpu_hours else worded(gettext_noop(
            "At the last week's rate %(tenant)s will use %(hours)s GPU-h past its commitment "
            "this period, %(money)s %(currency)s at the overage rate."), values)
        out.append(Condition(Kind.PROJECTED_OVERAGE, subject, tenant.pk, wording,
            {"projected_past_commitment_gpu_hours": str(past),
             "projected_overage_gpu_hours": str(overage), "projected_overage_cost": str(cost),
             "projected_borrowed_gpu_hours": str(bill.borrowed_gpu_hours),
             "exhaustion": figures.projected_exhaustion.isoformat()
             if figures.projected_exhaustion else None}))
    # Committed hours neither used nor lent: those lent to a partner are credited.
    unused = bill.unused_gpu_hours
    if (unused > committed * settings.ALERT_UNUSED_PERCENT / 100
            and now - period.start >= timedelta(days=1)):
        waste = bill.unused_money
        wording = worded(gettext_noop(
            "At the last week's rate %(tenant)s will leave %(hours)s committed GPU-h unused "
            "this period: %(money)s %(currency)s paid for nothing."), {
                "tenant": tenant.name, "hours": f"{unused:,.0f}", "money": _money(waste),
                "currency": terms.currency})
        out.append(Condition(Kind.PROJECTED_UNUSED, subject, tenant.pk, wording,
            {"projected_unused_gpu_hours": str(unused), "projected_waste": str(waste)}))
    if now - period.start >= timedelta(hours=1):
        completeness = fleet.tenant_completeness(tenant.pk, period.start, floor_hour(now))
        if completeness < COMPLETE:
            wording = worded(gettext_noop(
                "Only %(share).1f%% of period %(period)s has been reported by %(tenant)s's "
                "nodes so far: its usage may be undercounted."), {
                    "share": completeness * 100, "period": period.index + 1,
                    "tenant": tenant.name})
            out.append(Condition(Kind.INCOMPLETE_DATA, subject, tenant.pk, wording,
                {"completeness": round(completeness, 4)}))
    return out


def idle_conditions(now: datetime, contracts: list[Contract]) -> list[Condition]:
    """GPUs a tenant held for the whole last hour at under 5% utilisation, with their cost."""
    hour = floor_hour(now) - timedelta(hours=1)
    terms = {c.tenant_id: c.terms() for c in contracts}
    idle: dict[int, list[int]] = {}
    for tenant_id, gpu_id, allocated, busy in fleet.held_whole_hour(hour):
        if busy < IDLE_UTIL * allocated:
            idle.setdefault(tenant_id, []).append(gpu_id)
    everyone = {g for gpus in idle.values() for g in gpus}
    labels, holders = fleet.gpu_labels(everyone), fleet.holders_in(hour, everyone)
    out = []
    for tenant_id, gpus in idle.items():
        rate = terms[tenant_id].committed_rate if tenant_id in terms else Decimal(0)
        cost = (len(gpus) * rate).quantize(Decimal("0.01"))
        # Named by the pod or job that held each (a scheduler source says even when no
        # process ran), so that a lead knows whom to ask.
        names = sorted(labels.get(g, str(g)) + (f" ({holders[g]})" if g in holders else "")
                       for g in gpus)
        wording = worded(gettext_noop(
            "%(count)s GPUs were held for the last hour at under 5%% utilisation (%(gpus)s), "
            "costing %(money)s %(currency)s an hour."), {
                "count": len(gpus), "gpus": ", ".join(names[:10]) + (" …" if len(names) > 10
                                                                    else ""),
                "money": _money(cost),
                "currency": terms[tenant_id].currency if tenant_id in terms else ""})
        out.append(Condition(Kind.IDLE_GPUS, f"tenant:{tenant_id}:idle", tenant_id, wording,
            {"hour": hour.isoformat(), "gpus": names, "cost_per_hour": str(cost)}))
    return out


def node_conditions(now: datetime) -> list[Condition]:
    silent_after = timedelta(seconds=settings.NODE_SILENT_AFTER_SECONDS)
    out = []
    for node in fleet.silent_nodes(now - silent_after):
        if node.last_seen_at is None:  # registered, never heard from: is its agent running?
            wording = worded(gettext_noop(
                "Node %(node)s was registered on %(registered)s UTC and has never sent a "
                "sample: check that its agent runs with its token."), {
                    "node": node.name, "registered": f"{node.created_at:%Y-%m-%d %H:%M}"})
            details = {"last_seen_at": None, "registered_at": node.created_at.isoformat()}
        else:
            minutes = (now - node.last_seen_at).total_seconds() / 60
            wording = worded(gettext_noop(
                "Node %(node)s has sent nothing for %(minutes).0f minutes; its GPUs' usage is "
                "not being metered."), {"node": node.name, "minutes": minutes})
            details = {"last_seen_at": node.last_seen_at.isoformat()}
        out.append(Condition(Kind.NODE_SILENT, f"node:{node.name}", node.default_tenant_id,
                             wording, details))
    return out


REFUSAL_RECENT = timedelta(minutes=15)


def refusal_conditions(now: datetime) -> list[Condition]:
    """Devices the meter refused lately: past their node's device limit, claimed by two nodes
    at once, of another cluster, or naming another node's GPU as their parent. The operators'
    alerts (no tenant owns them), one a node and reason however many devices."""
    out = []
    for refusal in fleet.recent_refusals(now - REFUSAL_RECENT):
        node, uuid, reason = refusal.node, refusal.gpu_uuid, refusal.Reason
        holder = refusal.holder.name if refusal.holder else "?"
        numbers = {"node": node.name, "limit": node.max_devices, "device": uuid,
                   "devices": refusal.devices, "holder": holder, "samples": refusal.samples,
                   "since": f"{refusal.first_at:%Y-%m-%d %H:%M}",
                   "minutes": settings.DEVICE_MOVE_MINUTES}
        if refusal.reason == reason.DEVICE_LIMIT:
            text = gettext_noop(
                "Node %(node)s reports more GPUs than its limit of %(limit)s in an hour: "
                "%(devices)s devices refused in its last batch, %(device)s among them "
                "(%(samples)s samples since %(since)s). Raise its physical GPUs in the admin if "
                "the node really has them.")
        elif refusal.reason == reason.OTHER_CLUSTER:
            text = gettext_noop(
                "Node %(node)s reports %(device)s (and %(devices)s devices in all in its last "
                "batch), which node %(holder)s of another cluster holds; a GPU changes cluster "
                "only when an operator moves it (%(samples)s samples refused).")
        elif refusal.reason == reason.PARENT:
            text = gettext_noop(
                "Node %(node)s reports %(device)s (and %(devices)s devices in all in its last "
                "batch) as part of a GPU it does not hold (%(samples)s samples refused).")
        elif refusal.reason == reason.PARENT_CLAIM:
            text = gettext_noop(
                "Node %(node)s reports GPU %(device)s, which node %(holder)s named as the "
                "parent of its devices without ever reporting it (%(samples)s samples "
                "refused since %(since)s). If the GPU is in %(node)s, move it there.")
        else:
            text = gettext_noop(
                "Two nodes claim one GPU: %(node)s reports %(device)s, which %(holder)s still "
                "reports; it moves to %(node)s once %(holder)s has not reported it for "
                "%(minutes)s minutes (%(devices)s devices in the last batch, %(samples)s "
                "samples refused).")
        out.append(Condition(Kind.DEVICE_REFUSED, f"node:{node.name}:{refusal.reason}",
                             None, worded(text, numbers),
                             {"reason": refusal.reason, "device": uuid, "node": node.name,
                              "holder": holder,
                              "devices": refusal.devices, "samples": refusal.samples,
                              "last_at": refusal.last_at.isoformat()}))
    return out


def mismatch_conditions(now: datetime) -> list[Condition]:
    """Tenant-days of yesterday (TIME_ZONE) whose agents and Slurm accounting differ by more
    than SLURM_MISMATCH_PERCENT and SLURM_MISMATCH_MIN_GPU_HOURS: a missing agent, a wrong
    rule or a job that never reached the meter. The operators' alerts."""
    zone = ZoneInfo(settings.TIME_ZONE)
    yesterday = now.astimezone(zone).date() - timedelta(days=1)
    checks = [c for c in slurm.recent_checks(now, zone, days=2)
              if c.day == yesterday and c.tenant_id is not None and c.alarming(
                  settings.SLURM_MISMATCH_PERCENT, settings.SLURM_MISMATCH_MIN_GPU_HOURS)]
    names = dict(Tenant.objects.filter(pk__in={c.tenant_id for c in checks}).values_list(
        "pk", "name")) if checks else {}
    out = []
    for check in checks:
        wording = worded(gettext_noop(
            "On %(day)s the agents metered %(agents)s GPU-h for %(tenant)s on cluster "
            "%(cluster)s and Slurm's accounting %(slurm)s GPU-h (%(share).1f%% apart): look for "
            "a node whose agent is missing, a wrong attribution rule, or jobs that never "
            "reached the meter."), {
                "day": check.day.isoformat(), "agents": f"{check.agents_gpu_hours:,.1f}",
                "slurm": f"{check.slurm_gpu_hours:,.1f}", "tenant": names[check.tenant_id],
                "cluster": check.cluster, "share": abs(check.share) * 100})
        out.append(Condition(
            Kind.METER_MISMATCH, f"tenant:{check.tenant_id}:slurm:{check.cluster}"[:120], None,
            wording, {"day": check.day.isoformat(), "tenant": names[check.tenant_id],
                      "agents_gpu_hours": check.agents_gpu_hours,
                      "slurm_gpu_hours": check.slurm_gpu_hours}))
    return out


def conditions(now: datetime) -> list[Condition]:
    contracts = list(Contract.objects.filter(status=Contract.Status.ACTIVE)
                     .select_related("tenant", "plan").prefetch_related("amendments"))
    pools = pooled.pools(now)
    found = [c for contract in contracts for c in contract_conditions(contract, now, pools)]
    return (found + idle_conditions(now, contracts) + node_conditions(now)
            + refusal_conditions(now) + mismatch_conditions(now) + group_conditions(now)
            + guarantee.guarantee_conditions(now, contracts)
            + channels.failing_conditions(now))


def group_conditions(now: datetime) -> list[Condition]:
    """For each team of a sharing group, at the pace of the last week: the group running out
    of its pooled commitment (sharing will not cover its overage), and a lender whose unused
    committed hours will all be lent (it has none to spare for a late surge of its own)."""
    out = []
    for pool in pooled.pools(now):
        start = pool.members[0][1].period.start
        subject = f"group:{pool.group.pk}:{start:%Y%m%d%H%M}"
        short = pool.projected_gpu_hours - pool.committed_gpu_hours
        for contract, glance in pool.members:
            tenant = contract.tenant
            if short > 0:
                out.append(Condition(Kind.GROUP_RUNNING_OUT, f"{subject}:{contract.pk}",
                                     tenant.pk, worded(gettext_noop(
                    "At the last week's pace the sharing group %(group)s will use %(hours)s "
                    "GPU-h above its teams' pooled commitment this period: sharing will not "
                    "cover that overage."), {"group": pool.group.name,
                                             "hours": f"{short:,.0f}"}),
                    {"group": pool.group.name, "projected_short_gpu_hours": str(short)}))
            shared = pool.projected[contract.pk]
            unused = glance.projected_cost.unused_gpu_hours
            if unused > 0 and shared.lent_gpu_hours >= unused:
                out.append(Condition(Kind.ALL_LENT, f"{subject}:{contract.pk}", tenant.pk,
                                     worded(gettext_noop(
                    "At the last week's pace all %(hours)s committed GPU-h %(tenant)s leaves "
                    "unused this period will be lent to partners in %(group)s."), {
                        "hours": f"{unused:,.0f}", "tenant": tenant.name,
                        "group": pool.group.name}),
                    {"group": pool.group.name, "lent_gpu_hours": str(shared.lent_gpu_hours)}))
    return out


@dataclass(frozen=True)
class AlertRun:
    opened: list[Alert]
    resolved: list[Alert]


def evaluate_alerts(now: datetime) -> AlertRun:
    """Open, update and resolve alerts to match the conditions that hold at `now`."""
    return _apply(conditions(now), Alert.objects.filter(state=Alert.State.OPEN), now)


def refresh_contract_alerts(contract: Contract, now: datetime) -> AlertRun:
    """The same for one contract's own alerts (its period's commitment, budget, projections
    and completeness), at once: when its overage policy changes, an alert that spoke of the
    old one is changed or resolved without waiting for the next run."""
    return _apply(contract_conditions(contract, now),
                  Alert.objects.filter(state=Alert.State.OPEN,
                                       subject__startswith=f"contract:{contract.pk}:"), now)


def _apply(conditions_found: list[Condition], open_alerts, now: datetime) -> AlertRun:
    found = {(c.kind, c.subject): c for c in conditions_found}
    opened, resolved = [], []
    with transaction.atomic():
        current = {(a.kind, a.subject): a for a in open_alerts.select_for_update()}
        for key, condition in found.items():
            alert = current.get(key)
            if alert is not None:
                fresh = (condition.wording.english, condition.wording.stored(),
                         condition.details)
                if (alert.message, alert.wording, alert.details) != fresh:
                    alert.message, alert.wording, alert.details = fresh
                    alert.save(update_fields=["message", "wording", "details"])
                continue
            try:
                with transaction.atomic():
                    opened.append(Alert.objects.create(
                        tenant_id=condition.tenant_id, kind=condition.kind,
                        subject=condition.subject, message=condition.wording.english,
                        wording=condition.wording.stored(),
                        details=condition.details, opened_at=now))
            except IntegrityError:  # a concurrent run opened it first
                continue
        for key, alert in current.items():
            if key not in found:
                alert.state, alert.resolved_at = Alert.State.RESOLVED, now
                alert.save(update_fields=["state", "resolved_at"])
                resolved.append(alert)
        for alert in opened:
            notify_alert(alert, "opened")
        for alert in resolved:
            notify_alert(alert, "resolved")
    return AlertRun(opened, resolved)
