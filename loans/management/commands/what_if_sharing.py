import json

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from core.audit import AuditedCommand
from loans.maths.billing import money
from loans.models import Contract
from loans.services.advice.what_if import MAX_PERIODS, what_if


def contract_ids(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CommandError(f"--contracts takes contract ids separated by commas, e.g. 1,2,3; "
                           f"got {text[:40]!r}.") from None
    if not ids or min(ids) < 1:
        raise CommandError("--contracts takes contract ids (1 or more), e.g. 1,2,3.")
    return ids


class Command(AuditedCommand):
    help = (
        "What sharing a commitment would have saved: the contracts' last stated periods "
        "replayed from their stated figures as if they had been one sharing group (unused "
        "committed hours covering overage before any overage rate). Writes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("--contracts", required=True, type=contract_ids,
                            help="contract ids, separated by commas: 1,2,3")
        parser.add_argument("--periods", type=int, default=3,
                            help=f"how many past periods to replay (1-{MAX_PERIODS}, default 3)")
        parser.add_argument("--json", action="store_true", help="print JSON")

    def handle(self, *args, contracts: list[int], periods: int, json: bool, **options):
        found = {c.pk: c for c in Contract.objects.filter(pk__in=contracts)
                 .select_related("tenant", "plan").prefetch_related("amendments")}
        missing = [pk for pk in contracts if pk not in found]
        if missing:
            raise CommandError(f"No contract {', '.join(map(str, missing))}.")
        try:
            result = what_if([found[pk] for pk in dict.fromkeys(contracts)], periods)
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from None
        if json:
            self.stdout.write(_as_json(result))
            return
        self._table(result)

    def _table(self, result) -> None:
        cur = result.currency
        if not result.periods:
            self.stdout.write("No period was stated for two or more of these contracts yet: "
                              "nothing to replay.")
            return
        self.stdout.write(f"{'period from':<12} {'contracts':>9} {'alone':>16} {'sharing':>16} "
                          f"{'saving':>14} {'GPU-h shared':>13}")
        for p in result.periods:
            self.stdout.write(
                f"{p.start.date().isoformat():<12} {p.contracts:>9} {money(p.alone, cur):>16,} "
                f"{money(p.shared, cur):>16,} {money(p.saving, cur):>14,} "
                f"{p.shared_gpu_hours:>13,.1f}")
        self.stdout.write(f"{'total':<12} {'':>9} {money(result.alone, cur):>16,} "
                          f"{money(result.shared, cur):>16,} {money(result.saving, cur):>14,}")
        self.stdout.write(f"In {cur}. Each contract's saving:")
        for contract in result.contracts:
            self.stdout.write(f"  {contract.pk} {contract.tenant.name}: "
                              f"{money(result.by_contract[contract.pk], cur):,} {cur}")


def _as_json(result) -> str:
    cur = result.currency

    def amount(value) -> str:
        return str(money(value, cur))

    return json.dumps({
        "currency": cur, "alone": amount(result.alone), "sharing": amount(result.shared),
        "saving": amount(result.saving),
        "periods": [{"start": p.start.isoformat(), "end": p.end.isoformat(),
                     "contracts": p.contracts, "alone": amount(p.alone),
                     "sharing": amount(p.shared), "saving": amount(p.saving),
                     "shared_gpu_hours": str(p.shared_gpu_hours)} for p in result.periods],
        "contracts": [{"id": c.pk, "tenant": c.tenant.slug,
                       "saving": amount(result.by_contract[c.pk])} for c in result.contracts],
    }, indent=2)
