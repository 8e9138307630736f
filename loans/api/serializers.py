"""Serializers of the operators' API and the usage API's query. Models validate themselves
(constraints and clean()); the serializers hand their messages back as 400s."""

from datetime import date, datetime, time, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.translation import gettext as _
from rest_framework import serializers

from core.api import ModelCleanMixin
from core.bounds import FIRST_DAY, LAST_DAY, day_in_range
from loans.maths import billing
from loans.models import Contract, Plan, Tenant
from metering.services import AttributionRuleSerializer, replace_rules, rule_clashes
from metering.usage import floor_hour

MAX_SPAN = {"hour": timedelta(days=93), "day": timedelta(days=1100)}
DEFAULT_SPAN = {"hour": timedelta(days=7), "day": timedelta(days=30)}


class TenantSerializer(ModelCleanMixin, serializers.ModelSerializer):
    attribution_rules = AttributionRuleSerializer(many=True, required=False)
    nested = ("attribution_rules",)

    class Meta:
        model = Tenant
        fields = ["slug", "name", "attribution_rules", "alert_emails", "webhook_url",
                  "created_at"]
        read_only_fields = ["created_at"]

    def validate_attribution_rules(self, rules: list[dict]) -> list[dict]:
        refusal = rule_clashes(self.instance, rules)
        if refusal:
            raise serializers.ValidationError(refusal)
        return rules

    @transaction.atomic
    def create(self, validated: dict) -> Tenant:
        rules = validated.pop("attribution_rules", [])
        tenant = Tenant.objects.create(**validated)
        replace_rules(tenant, rules)
        return tenant

    @transaction.atomic
    def update(self, tenant: Tenant, validated: dict) -> Tenant:
        rules = validated.pop("attribution_rules", None)
        tenant = super().update(tenant, validated)
        if rules is not None:  # the list given replaces the tenant's rules
            replace_rules(tenant, rules)
        return tenant


class InCurrency:
    """Amounts written as their currency writes them (the columns keep four places)."""

    AMOUNTS = ("upfront_fee",)

    def to_representation(self, instance):
        data = super().to_representation(instance)
        currency = instance.currency or getattr(getattr(instance, "plan", None), "currency", "")
        for name in self.AMOUNTS:
            value = getattr(instance, name, None)
            if value is not None and currency:
                data[name] = str(billing.money(Decimal(value), currency))
        return data


class PlanSerializer(InCurrency, ModelCleanMixin, serializers.ModelSerializer):
    class Meta:
        model = Plan
        fields = "__all__"


class ContractSerializer(InCurrency, ModelCleanMixin, serializers.ModelSerializer):
    """Contracts: activating one signs it (the plan's numbers are copied into it); a signed
    contract's terms then change only by an amendment (/api/v1/contracts/{id}/amendments)."""

    tenant = serializers.SlugRelatedField(slug_field="slug", queryset=Tenant.objects.all())
    terms_in_force = serializers.SerializerMethodField(
        help_text="The terms of the period running now (the signed ones with the amendments in "
                  "force at its start), with that period's number; the contract's own fields "
                  "are the terms signed.")

    class Meta:
        model = Contract
        fields = "__all__"
        # Copied from the plan at signing, never chosen on their own.
        read_only_fields = ["ends_on", "created_at", "currency", "gpu_model"]

    def get_terms_in_force(self, contract: Contract) -> dict | None:
        if not contract.pk or not contract.is_signed:
            return None
        now = timezone.now()
        periods = contract.periods()
        running = contract.period_at(now)
        index = running.index if running else (0 if now < periods[0].start else len(periods) - 1)
        terms = contract.terms_for(index)
        return {"period": index + 1,
                **{name: str(getattr(terms, name)) for name in (
                    "base_quota_gpus", "max_quota_gpus", "committed_gpu_hours",
                    "committed_rate", "overage_rate")}}


def _moment(raw: str, zone: ZoneInfo, name: str) -> datetime:
    """An ISO date (local midnight in `zone`) or date-time (with an offset, or local)."""
    try:
        value = parse_datetime(raw)
        day = None if value else parse_date(raw)
    except ValueError:
        value = day = None
    if value is None and day is None:
        raise serializers.ValidationError(
            {name: _("%(value)s is not an ISO 8601 date or date-time.") % {"value": raw[:40]}})
    if not day_in_range(day or value.date()):
        raise serializers.ValidationError({name: _(
            "%(name)s must be from %(first)s to %(last)s.") % {
                "name": name, "first": FIRST_DAY, "last": LAST_DAY}})
    if value is None:
        value = datetime.combine(day, time(0), tzinfo=zone)
    elif timezone.is_naive(value):
        value = value.replace(tzinfo=zone)
    return value


class UsageQuery(serializers.Serializer):
    start = serializers.CharField(required=False, help_text="ISO date or date-time")
    end = serializers.CharField(required=False, help_text="ISO date or date-time, exclusive")
    granularity = serializers.ChoiceField(["hour", "day"], default="hour")
    tz = serializers.CharField(required=False, help_text="IANA zone for days and bare dates")

    def validate_tz(self, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise serializers.ValidationError(
                _("%(value)s is not an IANA time zone.") % {"value": value[:64]}) from None
        return value

    def validate(self, attrs: dict) -> dict:
        zone = ZoneInfo(attrs.get("tz") or settings.TIME_ZONE)
        granularity = attrs["granularity"]
        end = (_moment(attrs["end"], zone, "end") if "end" in attrs
               else floor_hour(timezone.now()) + timedelta(hours=1))
        start = (_moment(attrs["start"], zone, "start") if "start" in attrs
                 else end - DEFAULT_SPAN[granularity])
        if end <= start:
            raise serializers.ValidationError({"end": _("end must be after start.")})
        if end - start > MAX_SPAN[granularity]:
            raise serializers.ValidationError({"start": _(
                "At most %(days)s days by the %(unit)s; ask for days or a shorter range.")
                % {"days": MAX_SPAN[granularity].days, "unit": granularity}})
        return {"start": start, "end": end, "granularity": granularity, "zone": zone}


def local_day(moment: datetime, zone: ZoneInfo) -> date:
    return moment.astimezone(zone).date()
