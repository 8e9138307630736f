"""What a statement's PDF costs to render on the server (WeasyPrint, no browser).

    .venv/bin/python bench/pdf.py [--days 120] [--rounds 5]

Needs PostgreSQL (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/
gpuloans_pdf_bench; dropped and created afresh). Seeds the demo (four tenants, a sharing group,
--days of hourly usage), closes every due period, then renders each statement alone (the
statements API's `?period=N&format=pdf`: the period's statement and those that corrected it)
in English and in Chinese, --rounds times each, and prints the median and worst time a
statement, with the ledger's read timed apart. The first render of a process loads the fonts;
it is shown apart too. Target: under 1 s a statement.
"""

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import database_url, in_process, recreate_database  # noqa: E402

DATABASE_URL = database_url("gpuloans_pdf_bench")
in_process(DATABASE_URL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"database {DATABASE_URL}", flush=True)
    recreate_database(DATABASE_URL)

    import django
    from django.core.management import call_command
    from django.utils import timezone

    django.setup()
    from loans.demo import seed
    from loans.models import Contract
    from loans.services.exports import pdf
    from loans.services.ledger import read as ledgers
    from loans.services.ledger.closing import close_due_periods

    call_command("migrate", verbosity=0)
    now = timezone.now()
    seed(now=now, days=args.days, log=lambda _line: None)
    written = close_due_periods(now).written
    print(f"  demo seeded, {len(written)} statements written", flush=True)
    cases, read_ms = [], []
    for contract in Contract.objects.select_related("plan", "tenant"):
        started = time.perf_counter()
        ledger = ledgers.read(contract, now)
        read_ms.append((time.perf_counter() - started) * 1000)
        for statement in ledger.statements:
            cases.append(replace(ledger, statements=[s for s in ledger.statements if s is statement
                                                     or any(c.corrected_id == statement.pk
                                                            for c in s.corrections.all())]))
    started = time.perf_counter()
    pdf.render(cases[0], "en")
    first = (time.perf_counter() - started) * 1000
    print(f"  first render of the process (fonts loaded): {first:.0f} ms")
    for language in ("en", "zh-hans"):
        times, sizes = [], []
        for _round in range(args.rounds):
            for ledger in cases:
                started = time.perf_counter()
                body = pdf.render(ledger, language)
                times.append((time.perf_counter() - started) * 1000)
                sizes.append(len(body))
        print(f"  {language:<8} {len(cases)} statements x {args.rounds}: median "
              f"{statistics.median(times):.0f} ms, worst {max(times):.0f} ms a statement, "
              f"{statistics.median(sizes) / 1024:.0f} KB")
        print(f"target: a statement's PDF in under 1 s ({language}): worst {max(times):.0f} ms "
              + ("ok" if max(times) < 1000 else "MISSES"))
    print(f"  the ledger's read a contract (apart): median {statistics.median(read_ms):.0f} ms")


if __name__ == "__main__":
    main()
