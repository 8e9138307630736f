"""Which tenant a sample's usage belongs to, in the README's order. Pure: plain values in and out.

Owner values (namespace, account, user, job) hold within one cluster; node rules hold by the
node's name."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

FIELD_ORDER = ("namespace", "account", "user", "job", "node")


@dataclass(frozen=True)
class Rule:
    tenant_id: int
    field: str
    value: str
    priority: int = 100
    cluster_id: int | None = None  # None for node rules


class Attributor:
    """Rules indexed by (cluster, field, value), so one sample costs a few dictionary
    look-ups."""

    def __init__(self, rules: Iterable[Rule]):
        self._by_key: dict[tuple[int | None, str, str], Rule] = {}
        for rule in rules:
            key = (None if rule.field == "node" else rule.cluster_id, rule.field, rule.value)
            held = self._by_key.get(key)
            if held is None or _rank(rule) < _rank(held):
                self._by_key[key] = rule

    def tenant_for(
        self, owner: Mapping[str, object] | None, node_name: str, cluster_id: int | None,
        default_tenant_id: int | None,
    ) -> int | None:
        """The first matching rule's tenant (by priority, then field order), looking at owner
        values only within the node's cluster; else the node's default tenant; else None
        (unattributed)."""
        best: Rule | None = None
        for field in FIELD_ORDER:
            if field == "node":
                rule = self._by_key.get((None, "node", node_name))
            else:
                value = (owner or {}).get(field)
                if value is None or value == "":
                    continue
                rule = self._by_key.get((cluster_id, field, str(value)))
            if rule is not None and (best is None or _rank(rule) < _rank(best)):
                best = rule
        return best.tenant_id if best is not None else default_tenant_id


def _rank(rule: Rule) -> tuple[int, int]:
    return rule.priority, FIELD_ORDER.index(rule.field)
