"""Changing a signed contract: amendments from a period that has not begun, early termination
at the end of the current period, and applying an accepted recommendation (an amendment from
the next period). Each takes the contract's row lock, which the period close takes too, so an
amendment can never slip under a statement being written."""

from dataclasses import replace
from datetime import datetime
from decimal import Decimal, InvalidOperation

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _

from core import audit
from loans.maths import billing, guarantee
from loans.maths.billing import Terms
from loans.models import Amendment, Contract, Plan, Recommendation, Statement
from loans.models.amendments import INTEGER_TERMS, TEXT_TERMS
from loans.models.fields import MAX_HOURS_PER_PERIOD, tier_error
from loans.services import bursts

Kind = Recommendation.Kind
# Recommendations that change terms, and how their recommended value reads.
RECOMMENDED_TERM = {Kind.COMMITMENT: "committed_gpu_hours", Kind.BASE_QUOTA: "base_quota_gpus",
                    Kind.MAX_QUOTA: "max_quota_gpus"}


def first_open_period(contract: Contract, now: datetime) -> int:
    """The earliest period an amendment may apply from: the first that has not begun at `now`
    (and has no statement). No amendment reprices time that has passed."""
    stated = Statement.objects.filter(contract=contract, kind=Statement.Kind.PERIOD)
    last = max(stated.values_list("period_index", flat=True), default=-1)
    begun = sum(1 for period in contract.periods() if period.start <= now)
    return max(last + 1, begun)


def _locked(contract: Contract) -> Contract:
    return (Contract.objects.select_for_update().select_related("plan", "tenant")
            .prefetch_related("amendments").get(pk=contract.pk))


def _number(name: str, value) -> Decimal | int | str:
    if name in TEXT_TERMS:  # service-credit tiers, kept as the canonical text
        try:
            return guarantee.tiers_text(guarantee.parse_tiers(str(value)))
        except guarantee.TierError as error:
            raise ValidationError({name: tier_error(error)}) from None
    try:
        number = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise ValidationError({name: _("%(value)s is not a number.") % {
            "value": str(value)[:40]}}) from None
    if not number.is_finite() or number < 0:
        raise ValidationError({name: _("Must be a number of at least 0.")})
    if name == "guarantee_pct" and number > 100:
        raise ValidationError({name: _("The guarantee level must be between 0 and 100%.")})
    if name in INTEGER_TERMS:
        if number != number.to_integral_value():
            raise ValidationError({name: _("Must be a whole number of GPUs.")})
        return int(number)
    places = billing.RATE if name.endswith("rate") else Decimal("0.01")
    if number != number.quantize(places):
        raise ValidationError({name: _("At most %(places)s decimal places.") % {
            "places": -places.as_tuple().exponent}})
    return number.quantize(places)  # as the contract stores it, so old and new read alike


def check_terms(terms: Terms) -> None:
    """The rules every period's terms keep, with messages naming the field."""
    errors: dict[str, list[str]] = {}
    if terms.max_quota_gpus < 1:
        errors["max_quota_gpus"] = [_("The max quota must allow at least one GPU.")]
    elif terms.max_quota_gpus < terms.base_quota_gpus:
        errors["max_quota_gpus"] = [
            _("The max quota (%(max)s) cannot be below the base quota (%(base)s).")
            % {"max": terms.max_quota_gpus, "base": terms.base_quota_gpus}]
    if terms.committed_gpu_hours > terms.max_quota_gpus * MAX_HOURS_PER_PERIOD:
        errors["committed_gpu_hours"] = [
            _("%(hours)s GPU-hours can never be used with a max quota of %(max)s GPUs.")
            % {"hours": terms.committed_gpu_hours, "max": terms.max_quota_gpus}]
    if terms.overage_rate < terms.committed_rate:
        errors["overage_rate"] = [_("The overage rate cannot be below the committed rate.")]
    if errors:
        raise ValidationError(errors)


def amend(*, contract: Contract, changes: dict[str, object], from_period: int, reason: str,
          author=None, now: datetime) -> Amendment:
    """Write an amendment of `changes` (term name -> new value) in force from the start of
    period `from_period` (0 is the first); it must not have begun at `now`."""
    with transaction.atomic():
        contract = _locked(contract)
        return _amend(contract, changes, from_period, reason, author, now)


def _amend(contract: Contract, changes: dict, from_period: int, reason: str, author,
           now: datetime) -> Amendment:
    if not contract.is_signed or contract.status != Contract.Status.ACTIVE:
        raise ValidationError(_("Only an active, signed contract can be amended."))
    if not (reason or "").strip():
        raise ValidationError({"reason": _("Say why the contract is amended.")})
    unknown = sorted(set(changes) - set(Contract.AMENDABLE))
    if unknown:
        raise ValidationError({"changes": _("These terms cannot be amended: %(names)s (only "
                                            "%(allowed)s).") % {
            "names": ", ".join(unknown), "allowed": ", ".join(Contract.AMENDABLE)}})
    first, count = first_open_period(contract, now), contract.term_count()
    if not first <= from_period < count:
        raise ValidationError({"from_period": _(
            "An amendment applies from a period that has not begun: period %(first)s to "
            "%(last)s of this contract.") % {"first": first + 1, "last": count} if first < count
            else _("Every period of this contract has begun; it can no longer be amended.")})
    before = contract.terms_for(from_period)
    values = {name: _number(name, value) for name, value in changes.items()}
    after = replace(before, **values)
    diff = {name: [str(getattr(before, name)), str(value)] for name, value in values.items()
            if getattr(before, name) != value}
    if not diff:
        raise ValidationError({"changes": _("These are the terms already in force from period "
                                            "%(number)s.") % {"number": from_period + 1}})
    check_terms(after)
    return Amendment.objects.create(contract=contract, kind=Amendment.Kind.TERMS,
                                    from_period=from_period, changes=diff, reason=reason.strip(),
                                    author=author, created_at=now)


def terminate(*, contract: Contract, reason: str, author=None, now: datetime) -> Amendment:
    """End the contract early, at the end of its current period: the periods after it are
    dropped from its term. Before its first period starts, cancel it instead."""
    with transaction.atomic():
        contract = _locked(contract)
        if contract.status != Contract.Status.ACTIVE:
            raise ValidationError(_("Only an active contract can be terminated."))
        if not (reason or "").strip():
            raise ValidationError({"reason": _("Say why the contract is terminated.")})
        current = contract.period_at(now)
        if current is None:
            if now < contract.window_start:
                raise ValidationError(_("This contract has not started; cancel it instead."))
            raise ValidationError(_("This contract has already ended."))
        count = contract.term_count()
        if current.index + 1 >= count:
            raise ValidationError(_("This contract already ends at the end of its current "
                                    "period (%(end)s).") % {"end": current.end.isoformat()})
        amendment = Amendment.objects.create(
            contract=contract, kind=Amendment.Kind.TERMINATION, from_period=current.index + 1,
            changes={"term_months": [str(count), str(current.index + 1)]},
            reason=reason.strip(), author=author, created_at=now)
        before = {"term_months": contract.term_months, "ends_on": contract.ends_on,
                  "window_end": contract.window_end}
        contract.term_months = current.index + 1
        contract._place()
        after = {"term_months": contract.term_months, "ends_on": contract.ends_on,
                 "window_end": contract.window_end}
        Contract.objects.filter(pk=contract.pk).update(**after)
        audit.changed(contract, before, after, tenant=contract.tenant_id)
        bursts.clip_to_contract(contract, now)
        return amendment


def recommended_changes(rec: Recommendation) -> dict[str, object]:
    """The terms an accepted recommendation changes ({} for advice that changes none)."""
    if rec.kind in RECOMMENDED_TERM:
        return {RECOMMENDED_TERM[rec.kind]: rec.recommended}
    if rec.kind == Kind.PLAN:
        plan = Plan.objects.filter(name=rec.recommended).first()
        if plan is None:
            raise ValidationError(_("The plan %(plan)s is no longer in the catalogue.")
                                  % {"plan": rec.recommended})
        return {"base_quota_gpus": plan.base_quota_gpus, "max_quota_gpus": plan.max_quota_gpus,
                "committed_gpu_hours": plan.committed_gpu_hours,
                "committed_rate": plan.committed_rate,
                "overage_rate": plan.effective_overage_rate()}
    return {}


def apply_recommendation(*, recommendation: Recommendation, author, now: datetime
                         ) -> Recommendation:
    """Apply an accepted recommendation: an amendment from the next period (advice that
    changes no term, such as consolidating jobs, is marked applied without one)."""
    with transaction.atomic():
        rec = Recommendation.objects.select_for_update().get(pk=recommendation.pk)
        if rec.state != Recommendation.State.ACCEPTED:
            raise ValidationError(_("Only an accepted recommendation can be applied (this one "
                                    "is %(state)s).") % {"state": rec.get_state_display()})
        contract = _locked(rec.contract)
        changes = recommended_changes(rec)
        if changes:
            start = first_open_period(contract, now)
            rec.amendment = _amend(
                contract, changes, start,
                _("Recommendation %(id)s accepted by %(lead)s: %(what)s") % {
                    "id": rec.pk, "lead": rec.decided_by or "-",
                    "what": rec.get_kind_display()},
                author, now)
        rec.state, rec.applied_at, rec.applied_by = Recommendation.State.APPLIED, now, author
        rec.save(update_fields=["state", "applied_at", "applied_by", "amendment"])
        return rec
