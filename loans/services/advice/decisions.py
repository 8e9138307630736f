"""A lead's decision on a recommendation: accepted (a request for an operator to apply it,
loans.services.ledger.amendments.apply_recommendation) or dismissed (not raised again with a
value near it for 30 days, loans.services.advice.standalone)."""

from datetime import datetime

from core import audit
from loans.models import Recommendation


def decide(recommendation: Recommendation, *, accept: bool, by, at: datetime) -> bool:
    """The recommendation accepted or dismissed if it is still open; False where it was
    decided or replaced meanwhile. One conditional UPDATE, so two clicks, or a lead and the
    job, cannot both act on it."""
    state = Recommendation.State.ACCEPTED if accept else Recommendation.State.DISMISSED
    decided = bool(Recommendation.objects.filter(
        pk=recommendation.pk, state=Recommendation.State.OPEN).update(
        state=state, decided_at=at, decided_by=by))
    if decided:
        audit.changed(recommendation, {"state": Recommendation.State.OPEN, "decided_by": None},
                      {"state": state, "decided_by": getattr(by, "username", by)})
    return decided
