"""Tenants, their members, the plan catalogue, contracts and their amendments, statements and
their correction lines, alerts, the forecast band's measured coverage, recommendations, API
tokens, chat channels and who is told what, jobs waiting for the broker, the changes made to
Slurm's limits and the intervals gpuloans held a contract."""

from loans.models.admission import OveragePolicy, policies_of, policy_of
from loans.models.alerts import Alert
from loans.models.amendments import Amendment
from loans.models.bursts import BurstEvent, BurstRequest
from loans.models.contracts import Contract, Terms
from loans.models.fields import (
    MAX_HOURS_PER_PERIOD,
    MAX_TERM_MONTHS,
    currency_validator,
    default_currency,
    default_time_zone,
    non_negative,
    slug_validator,
    validate_time_zone,
)
from loans.models.forecasting import BandCoverage
from loans.models.guarantee import ContractHold
from loans.models.identity import DirectoryAccount
from loans.models.notices import Channel, Notice, NoticeProfile, RequiredAlert, Timing
from loans.models.outbox import PendingTask
from loans.models.plans import Plan
from loans.models.recommendations import Recommendation
from loans.models.sharing import GroupStatement, SharingGroup, SharingLine, SharingMember
from loans.models.slurm import SlurmAccountHold, SlurmLimitChange
from loans.models.statements import CorrectionLine, Statement
from loans.models.tenants import Membership, Tenant
from loans.models.tokens import ApiToken

__all__ = [
    "BandCoverage", "DirectoryAccount",
    "MAX_HOURS_PER_PERIOD", "MAX_TERM_MONTHS", "Alert", "Amendment", "ApiToken", "BurstEvent",
    "BurstRequest", "Contract", "ContractHold", "CorrectionLine", "Membership", "OveragePolicy",
    "PendingTask", "Channel", "Notice", "NoticeProfile", "RequiredAlert", "Timing",
    "Plan", "policies_of", "policy_of", "Recommendation", "SlurmAccountHold", "SlurmLimitChange",
    "GroupStatement", "SharingGroup", "SharingLine", "SharingMember", "Statement", "Tenant",
    "Terms", "currency_validator",
    "default_currency", "default_time_zone", "non_negative", "slug_validator", "validate_time_zone",
]
