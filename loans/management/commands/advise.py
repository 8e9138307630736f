import json
from decimal import Decimal, InvalidOperation
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.core.management.base import CommandError
from django.utils import timezone

from core.admin_figures import written
from core.audit import AuditedCommand
from loans.models import Tenant
from loans.services.advice.first_commitment import (
    FirstAdvice,
    NoOnDemandPrice,
    Option,
    advise,
    slurm_history,
)
from loans.services.advice.history import HistoryError, read_history

MAX_BYTES = 64 * 1024 * 1024


class Command(AuditedCommand):
    help = ("What to sign first, from a history of usage and no contract: the on-demand cost "
            "and each offered plan at its best commitment, with P10/P50/P90 of the total over "
            "a term, and the advice. The history is a CSV of ts,gpus (GPUs in use each hour) "
            "or Slurm's sacct -P -o JobID,Account,User,Start,End,AllocTRES output; or, with "
            "--tenant, the tenant's Slurm accounting as import_slurm_usage imported it.")

    def add_arguments(self, parser):
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--history", metavar="FILE",
                            help="the usage file (CSV ts,gpus or sacct -P output); - for stdin")
        source.add_argument("--tenant", metavar="SLUG",
                            help="the tenant's usage as Slurm accounting says, imported with "
                                 "import_slurm_usage")
        parser.add_argument("--term-months", type=int, default=12,
                            help="the term to price (default 12)")
        parser.add_argument("--currency", default=settings.DEFAULT_CURRENCY,
                            help="the catalogue's plans in this currency (default "
                                 f"{settings.DEFAULT_CURRENCY})")
        parser.add_argument("--on-demand-rate", metavar="PRICE",
                            help="the price of a GPU-hour without commitment, where no offered "
                                 "plan without a commitment gives it")
        parser.add_argument("--time-zone", default=settings.TIME_ZONE,
                            help="the zone of sacct's Start and End (default "
                                 f"{settings.TIME_ZONE})")
        parser.add_argument("--account", default="", help="sacct: only this account's jobs")
        parser.add_argument("--gaps-as-idle", action="store_true",
                            help="CSV: read hours without a row as idle instead of refusing")
        parser.add_argument("--json", action="store_true", help="print the advice as JSON")

    def handle(self, *args, **options):
        if not 1 <= options["term_months"] <= 120:
            raise CommandError("--term-months must be a whole number from 1 to 120.")
        try:
            zone = ZoneInfo(options["time_zone"])
        except (ZoneInfoNotFoundError, ValueError):
            raise CommandError(f"--time-zone {options['time_zone']!r} is not a time zone "
                               "(Asia/Shanghai, UTC).") from None
        rate = None
        if options["on_demand_rate"] is not None:
            try:
                rate = Decimal(options["on_demand_rate"])
            except InvalidOperation:
                rate = Decimal("NaN")
            if not rate.is_finite() or rate <= 0 or rate > 10**6:
                raise CommandError("--on-demand-rate must be a price above 0 (14.50).")
        try:
            if options["tenant"]:
                history = slurm_history(self._tenant(options["tenant"]).pk, timezone.now())
            else:
                history = read_history(self._read(options["history"]), zone=zone,
                                       gaps_as_idle=options["gaps_as_idle"],
                                       account=options["account"])
            result = advise(history, term_months=options["term_months"],
                            currency=options["currency"].upper(), on_demand_rate=rate)
        except NoOnDemandPrice as error:
            raise CommandError(f"{error.problems[0]}: give it (--on-demand-rate).") from None
        except HistoryError as error:
            raise CommandError(f"{options['history'] or options['tenant']}: " + "\n  ".join(
                ["cannot advise:", *error.problems])) from None
        if options["json"]:
            self.stdout.write(json.dumps(result.as_json(), indent=2))
        else:
            self._print(result)

    @staticmethod
    def _tenant(slug: str) -> Tenant:
        tenant = Tenant.objects.filter(slug=slug).first()
        if tenant is None:
            raise CommandError(f"No tenant {slug!r}.")
        return tenant

    def _read(self, name: str) -> str:
        if name == "-":
            import sys
            return sys.stdin.read(MAX_BYTES)
        path = Path(name)
        if not path.is_file():
            raise CommandError(f"{name}: no such file.")
        if path.stat().st_size > MAX_BYTES:
            raise CommandError(f"{name}: larger than {MAX_BYTES // 2**20} MiB.")
        try:
            return path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise CommandError(f"{name}: not UTF-8 text.") from None

    def _print(self, result: FirstAdvice) -> None:
        out, c = self.stdout.write, result.currency
        out(f"History: {result.history_start} to {result.history_end}, "
            f"{result.history_hours:,} hours ({result.source}).")
        for note in result.skipped:
            out(f"  left out: {note}")
        out(f"Usage: {result.mean_gpus:,.2f} GPUs on average, {result.peak_gpus:,.2f} at the "
            f"peak; a period ({result.period_hours} h) used P10 {result.period_usage_p10:,.0f}, "
            f"P50 {result.period_usage_p50:,.0f}, P90 {result.period_usage_p90:,.0f} GPU-h.")
        out(f"Over a {result.term_months}-month term, total cost in {c} (P10 / P50 / P90):")

        def line(option: Option) -> str:
            if option.commitment:
                what = (f"{option.name}: commit {option.commitment:,.0f} GPU-h a period at "
                        f"{written(option.committed_rate, 'rate')}, overage "
                        f"{written(option.overage_rate, 'rate')}"
                        + (f", upfront {option.upfront_fee:,.2f}" if option.upfront_fee else ""))
            else:
                what = f"{option.name} at {written(option.overage_rate, 'rate')} a GPU-h"
            if not option.fits_peak:
                what += f" (its cap of {option.max_quota_gpus} GPUs is below the peak)"
            return (f"  {what}\n      {option.p10:,.2f} / {option.p50:,.2f} / "
                    f"{option.p90:,.2f}{'   <- advised' if option.name == result.advised else ''}")

        out(line(result.on_demand))
        for option in result.plans:
            out(line(option))
        chosen = next((o for o in result.plans if o.name == result.advised), result.on_demand)
        if chosen is result.on_demand:
            out(f"Advice: stay on demand; no offered plan's median total over the term is "
                f"below {chosen.p50:,.2f} {c}.")
        else:
            saving = result.on_demand.p50 - chosen.p50
            out(f"Advice: sign {chosen.name} committing {chosen.commitment:,.0f} GPU-h a period: "
                f"a median total of {chosen.p50:,.2f} {c} over the term, {saving:,.2f} less than "
                f"on demand.")
