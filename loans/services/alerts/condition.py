"""One alert's condition: what every alert module finds and loans.services.alerts.conditions
opens, updates and resolves."""

from dataclasses import dataclass, field

from core.wording import Wording


@dataclass(frozen=True)
class Condition:
    kind: str
    subject: str
    tenant_id: int | None
    wording: Wording
    details: dict = field(default_factory=dict)
