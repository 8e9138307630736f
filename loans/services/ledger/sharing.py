"""Sharing groups as the ledger and the close read them: who shared a period with whom, and
each member's period after the group's sharing (loans.maths.sharing), from one read of the
meter for all the members. A period's sharing is decided by the group's members at its start
(a contract joins or leaves only from a period that has not begun), so re-reading it later
re-runs the same sharing on the usage the meter holds then (a correction).

Joining and leaving (operators: the admin and the API) are here too, with their checks."""

from dataclasses import dataclass, field
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _

from loans.maths import billing
from loans.maths import sharing as maths
from loans.models import Contract, SharingGroup, SharingMember, Statement
from loans.models.contracts import with_amendments
from metering import usage


@dataclass
class Groups:
    """The memberships of every group a contract has been in, and the sharing worked out so
    far, by (group id, period start): the members of one close share one read."""

    rows: list[SharingMember] = field(default_factory=list)
    sharing: dict[tuple[int, datetime], dict[int, maths.Shared]] = field(default_factory=dict)
    members: dict[tuple[int, datetime], list[maths.Member]] = field(default_factory=dict)
    # The meter's sums by span (tenant, start, end) read so far: the ledger's read and the
    # sharing's read each span once between them, and agree on it.
    totals: dict[usage.Span, usage.Totals] = field(default_factory=dict)

    def totals_of(self, spans: list[usage.Span]) -> list[usage.Totals]:
        """The meter's sums of each span, those not read yet in one query."""
        todo = list(dict.fromkeys(s for s in spans if s not in self.totals))
        if todo:
            self.totals.update(zip(todo, usage.span_totals(todo), strict=True))
        return [self.totals[s] for s in spans]

    def group_at(self, contract_id: int, instant: datetime) -> int | None:
        return next((r.group_id for r in self.rows
                     if r.contract_id == contract_id and r.covers(instant)), None)

    def members_at(self, group_id: int, instant: datetime) -> list[Contract]:
        """The group's contracts with a period beginning at `instant` (a contract past its
        end shares nothing)."""
        return sorted((r.contract for r in self.rows
                       if r.group_id == group_id and r.covers(instant)
                       and r.contract.period_at(instant) is not None), key=lambda c: c.pk)


def groups_of(contract_ids: list[int]) -> Groups:
    """Every membership of every group the contracts have been in (two queries, none where
    they never were)."""
    group_ids = set(SharingMember.objects.filter(contract_id__in=contract_ids,
                                                 voided_at__isnull=True)
                    .values_list("group_id", flat=True))
    if not group_ids:
        return Groups()
    rows = list(SharingMember.objects.filter(group_id__in=group_ids, voided_at__isnull=True)
                .select_related("contract", "contract__plan", "contract__tenant", "group"))
    with_amendments(list({r.contract_id: r.contract for r in rows}.values()))
    return Groups(rows)


def partners(contract: Contract) -> list[int]:
    """The contract and every contract that shared a group with it, or with one of those
    (a contract that moved between groups links them), by id: what is closed together."""
    found, grown = {contract.pk}, True
    while grown:
        rows = set(SharingMember.objects.filter(
            group__members__contract__in=found, group__members__voided_at__isnull=True,
            voided_at__isnull=True).values_list("contract_id", flat=True))
        grown = not rows <= found
        found |= rows
    return sorted(found)


def work_out(groups: Groups, pairs: list[tuple[int, billing.Period]], now: datetime) -> None:
    """The sharing of each (group, period) not worked out yet, every member's usage read in
    one query."""
    todo = {}
    for group_id, period in pairs:
        if (group_id, period.start) not in groups.sharing:
            todo[(group_id, period.start)] = (group_id, period)
    if not todo:
        return
    spans, plan = [], []
    for (group_id, start), (_g, period) in todo.items():
        members = groups.members_at(group_id, start)
        plan.append(((group_id, start), members))
        spans += [(m.tenant_id, period.start, min(period.end, now)) for m in members]
    totals = iter(groups.totals_of(spans))
    for key, members in plan:
        rows = []
        for member in members:
            metered = next(totals)
            index = member.period_at(key[1]).index
            rows.append(maths.Member(member.pk, member.terms_for(index),
                                     billing.gpu_hours(metered.allocated_gpu_hours)))
        currency = rows[0].terms.currency if rows else "CNY"
        groups.sharing[key], groups.members[key] = maths.share(rows, currency), rows


def shared(groups: Groups, contract_id: int, period: billing.Period) -> maths.Shared | None:
    group_id = groups.group_at(contract_id, period.start)
    if group_id is None:
        return None
    return groups.sharing[(group_id, period.start)][contract_id]


# Joining and leaving.

def next_start(contract: Contract, now: datetime) -> datetime | None:
    """The start of the contract's first period that has not begun; None if none is left."""
    return next((p.start for p in contract.periods() if p.start > now), None)


def sharing_from(group: SharingGroup, joins_at: datetime, contract: Contract
                 ) -> list[SharingMember]:
    """The group's memberships, other than the contract's, that still share at or after
    `joins_at`: a contract that has ended, left before then or was voided is no partner."""
    return [m for m in group.members.select_related("contract", "contract__tenant")
            .filter(voided_at__isnull=True)
            if m.contract_id != contract.pk and not m.is_void and m.ends_at > joins_at]


def _check_fits(group: SharingGroup, contract: Contract, joins_at: datetime) -> None:
    if contract.status not in Contract.HOLDING:
        raise ValidationError(_("Contract %(id)s is not signed: only signed contracts share.")
                              % {"id": contract.pk})
    currency = contract.terms_for(0).currency
    if currency != group.currency:
        raise ValidationError(_("Contract %(id)s is billed in %(currency)s; the group %(group)s "
                                "is in %(group_currency)s.") % {
            "id": contract.pk, "currency": currency, "group": group.name,
            "group_currency": group.currency})
    starts = {p.start for p in contract.periods()}
    for row in sharing_from(group, joins_at, contract):
        other = row.contract
        if other.tenant_id == contract.tenant_id:
            raise ValidationError(_("Contract %(id)s is of a tenant already in the group, by "
                                    "contract %(other)s.") % {"id": contract.pk,
                                                              "other": other.pk})
        theirs = {p.start for p in other.periods()}
        overlap = [s for s in starts if s >= joins_at and other.period_at(s) is not None]
        if any(s not in theirs for s in overlap) or (
                other.period_at(joins_at) is not None and joins_at not in theirs):
            raise ValidationError(_(
                "Contract %(id)s's periods do not begin and end with those of contract "
                "%(other)s (%(zone)s, from the %(day)s of the month): a group shares one "
                "calendar.") % {"id": contract.pk, "other": other.pk,
                                "zone": other.time_zone, "day": other.starts_on.day})


def create_group(*, name: str, currency: str, contracts: list[Contract], by,
                 now: datetime) -> SharingGroup:
    """A new group with these contracts, each joining as join() says; ValidationError with
    the reason where the group or one contract cannot be, and then nothing is created."""
    with transaction.atomic():
        group = SharingGroup(name=name, currency=currency)
        group.full_clean()
        group.save()
        for contract in contracts:
            join(group, contract, by=by, now=now)
    return group


def join(group: SharingGroup, contract: Contract, *, by, now: datetime) -> SharingMember:
    """The contract joins from its next period that has not begun, or from its first if it
    has no statement yet; ValidationError with the reason where it cannot."""
    with transaction.atomic():
        Contract.objects.select_for_update().filter(pk=contract.pk).first()
        if any(not m.is_void and m.ends_at > now for m in SharingMember.objects.filter(
                contract=contract, leaves_at__isnull=True).select_related("contract")):
            raise ValidationError(_("Contract %(id)s is in a sharing group already: it leaves "
                                    "that one first.") % {"id": contract.pk})
        stated = Statement.objects.filter(contract=contract).exists()
        # With no statement yet it may share from its first period, unless the group has
        # stated that period already.
        joins_at = next_start(contract, now) if stated else contract.periods()[0].start
        if joins_at is not None and Statement.objects.filter(
                contract__sharing__group=group, period_end__gt=joins_at).exists():
            joins_at = next_start(contract, now)
        if joins_at is None:
            raise ValidationError(_("Contract %(id)s has no period left to share.")
                                  % {"id": contract.pk})
        earlier = SharingMember.objects.filter(contract=contract, leaves_at__gt=joins_at)
        if earlier.exists():
            raise ValidationError(_("Contract %(id)s left a group from a later period; it "
                                    "may join again from then.") % {"id": contract.pk})
        _check_fits(group, contract, joins_at)
        member = SharingMember(group=group, contract=contract, joins_at=joins_at, added_by=by)
        member.full_clean()
        member.save()
        return member


def leave(group: SharingGroup, contract: Contract, *, by, now: datetime) -> SharingMember:
    """The contract leaves from its next period that has not begun (from its start, where it
    joined for a period not begun yet). A contract that has ended left with its end, and one
    in its last period shares to its end: both are answered as they are (see `departure`),
    not refused."""
    with transaction.atomic():
        Contract.objects.select_for_update().filter(pk=contract.pk).first()
        member = (SharingMember.objects.select_related("contract")
                  .filter(group=group, contract=contract, leaves_at__isnull=True,
                          voided_at__isnull=True).first())
        if member is None:
            member = (SharingMember.objects.select_related("contract")
                      .filter(group=group, contract=contract).order_by("-joins_at").first())
            if member is not None and (member.ended(now) or member.is_void):
                return member
            raise ValidationError(_("Contract %(id)s is not in the group %(group)s.")
                                  % {"id": contract.pk, "group": group.name})
        if member.joins_at > now:
            member.delete()  # it never shared a period
            return member
        leaves_at = next_start(contract, now)
        if leaves_at is None:
            return member  # it has ended, or shares its last period to the end
        member.leaves_at, member.removed_by = leaves_at, by
        member.save(update_fields=["leaves_at", "removed_by", "changed_at"])
        return member


def departure(member: SharingMember, now: datetime) -> str:
    """What removing a contract did, in the reader's words."""
    day = member.ends_at.astimezone(member.contract.zone).date().isoformat()
    if member.is_void:
        return _("Contract %(id)s was cancelled before its start: its membership is void and "
                 "it shares nothing.") % {"id": member.contract_id}
    if member.pk is None:
        return _("Contract %(id)s was to join from a period not begun yet: it no longer "
                 "will.") % {"id": member.contract_id}
    if member.ends_at <= now:
        return _("Contract %(id)s ended on %(day)s: its membership ended with it.") % {
            "id": member.contract_id, "day": day}
    if member.leaves_at is None:
        return _("Contract %(id)s is in its last period: it shares to its end, %(day)s.") % {
            "id": member.contract_id, "day": day}
    return _("Contract %(id)s stops sharing from %(day)s.") % {
        "id": member.contract_id, "day": day}
