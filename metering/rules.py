"""A tenant's attribution rules as the operators' API reads and writes them: the shape of one
rule, the check that no other tenant claims it, and replacing a tenant's list. The tenant's
own serializer (loans) nests these through metering.services."""

from django.utils.translation import gettext as _
from rest_framework import serializers

from core import audit
from metering.models import AttributionRule, Cluster, default_cluster


class AttributionRuleSerializer(serializers.ModelSerializer):
    """An owner rule (namespace, account, user, job) holds within its cluster: the default
    cluster when none is named. A node rule names no cluster."""

    cluster = serializers.SlugRelatedField(slug_field="name", queryset=Cluster.objects.all(),
                                           allow_null=True, required=False)

    class Meta:
        model = AttributionRule
        fields = ["cluster", "field", "value", "priority"]
        validators = []  # uniqueness is checked with the tenant (rule_clashes)

    def validate(self, attrs: dict) -> dict:
        if attrs["field"] == AttributionRule.Field.NODE:
            if attrs.get("cluster") is not None:
                raise serializers.ValidationError(
                    {"cluster": _("A node rule names no cluster: the node is already in one.")})
        elif attrs.get("cluster") is None:
            attrs["cluster"] = Cluster.objects.get(pk=default_cluster())
        return attrs


def _key(cluster, field, value):
    return (None if field == AttributionRule.Field.NODE else cluster, field, value)


def rule_clashes(tenant, rules: list[dict]) -> str | None:
    """Why these rules cannot be the tenant's (one listed twice, or claimed by another
    tenant), or None."""
    keys = [_key(r.get("cluster"), r["field"], r["value"]) for r in rules]
    if len(set(keys)) != len(keys):
        return _("A rule is listed twice.")
    taken = AttributionRule.objects.exclude(tenant=tenant).filter(
        field__in=[f for _c, f, _v in keys], value__in=[v for _c, _f, v in keys])
    clashes = [f"{r.field}={r.value} ({r.tenant.slug})"
               for r in taken.select_related("tenant", "cluster")
               if _key(r.cluster, r.field, r.value) in keys]
    if clashes:
        return _("Already claimed by another tenant: %(rules)s") % {"rules": ", ".join(clashes)}
    return None


def replace_rules(tenant, rules: list[dict]) -> None:
    """The tenant's rules become exactly these (inside the caller's transaction)."""
    AttributionRule.objects.filter(tenant=tenant).delete()
    audit.created(AttributionRule.objects.bulk_create(
        AttributionRule(tenant=tenant, **r) for r in rules))
