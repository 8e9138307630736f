"""What to sign first from a history file (manage.py advise --history): the CSV and sacct
readers name every row they cannot read, spread jobs over the hours they ran without ever
counting past them, and the advice prices each option over the same seeded term draws."""

import html
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from loans.models import Plan
from loans.services.advice.history import HistoryError, read_history
from tests.conftest import make_user
from tests.tiers import examples

T0 = datetime(2026, 8, 1, tzinfo=UTC)
SACCT = "JobID|Account|User|Start|End|AllocTRES\n"


def hourly_csv(hours: int, gpus=lambda k: 4.0, skip=()) -> str:
    rows = [f"{(T0 + timedelta(hours=k)).isoformat()},{gpus(k)}" for k in range(hours)
            if k not in skip]
    return "ts,gpus\n" + "\n".join(rows) + "\n"


def test_a_csv_is_read_hour_by_hour():
    history = read_history(hourly_csv(5, lambda k: k))
    assert history.start == T0 and history.hours == [0, 1, 2, 3, 4] and history.source == "csv"


def test_every_row_a_csv_cannot_use_is_named_with_its_line():
    text = ("ts,gpus\n2026-08-01T00:00:00Z,4\n2026-08-01T01:00:00,4\n2026-08-01T02:30:00Z,4\n"
            "2026-08-01T03:00:00Z,-1\n2026-08-01T00:00:00Z,3\nnot a time,2\n2026-08-01T05:00Z\n")
    with pytest.raises(HistoryError) as error:
        read_history(text)
    problems = error.value.problems
    assert problems[0].startswith("line 3: '2026-08-01T01:00:00' is not an ISO 8601 time "
                                  "with a UTC offset")
    assert problems[1] == "line 4: 2026-08-01T02:30:00Z is not on the hour"
    assert problems[2].startswith("line 5: gpus '-1' is not a number of GPUs")
    assert problems[3] == "line 6: 2026-08-01 00:00 UTC is given twice"
    assert problems[4].startswith("line 7: 'not a time'")
    assert problems[5] == "line 8: expected ts,gpus, found 1 fields"


def test_hours_a_csv_leaves_out_are_named_unless_said_to_be_idle():
    text = hourly_csv(10, skip={3, 4, 7})
    with pytest.raises(HistoryError) as error:
        read_history(text)
    assert error.value.problems == [
        "no row for 2026-08-01 03:00 to 2026-08-01 04:00 UTC (2 hours): give them (0 where "
        "nothing ran), or read them as idle (--gaps-as-idle)",
        "no row for 2026-08-01 07:00 UTC (1 hour): give it (0 where nothing ran), or read it "
        "as idle (--gaps-as-idle)"]
    history = read_history(text, gaps_as_idle=True)
    assert history.hours == [4, 4, 4, 0, 0, 4, 4, 0, 4, 4]
    assert history.skipped[0] == "2 hours without a row from 2026-08-01 03:00 UTC read as idle"


def test_an_unknown_header_says_what_is_expected():
    with pytest.raises(HistoryError, match="expected the header ts,gpus"):
        read_history("time;gpus\n")


def test_sacct_jobs_are_spread_over_the_hours_they_ran_steps_and_running_jobs_left_out():
    text = SACCT + (
        "1|vision|ann|2026-08-01T08:30:00|2026-08-01T10:00:00|cpu=8,gres/gpu=2,node=1\n"
        "1.batch|vision|||2026-08-01T10:00:00|cpu=8,gres/gpu=2,node=1\n"
        "2|vision|bob|2026-08-01T09:00:00|2026-08-01T09:15:00|gres/gpu:a100=4,node=1\n"
        "3|vision|cai|2026-08-01T09:00:00|Unknown|gres/gpu=8\n"
        "4|nlp|dan|2026-08-01T09:00:00|2026-08-01T11:00:00|gres/gpu=8\n"
        "5|vision|eve|2026-08-01T09:00:00|2026-08-01T11:00:00|cpu=4,mem=8G\n")
    history = read_history(text, zone=UTC, account="vision")
    assert history.start == datetime(2026, 8, 1, 8, tzinfo=UTC)
    assert history.hours == [1.0, 3.0]  # 08:30-09:00 at 2; 09:00-10:00 at 2 plus 4 for 15 min
    assert history.skipped == ["1 job steps (their jobs are counted)",
                               "1 jobs still running (no End)",
                               "1 jobs of other accounts than vision"]


def test_sacct_rows_it_cannot_read_are_named():
    text = SACCT + ("1|vision|ann|yesterday|2026-08-01T10:00:00|gres/gpu=2\n"
                    "2|vision|bob|2026-08-01T10:00:00|2026-08-01T09:00:00|gres/gpu=2\n"
                    "3|vision|cai\n")
    with pytest.raises(HistoryError) as error:
        read_history(text)
    assert [p.split(":")[0] for p in error.value.problems] == ["line 2", "line 3", "line 4"]
    assert "ends before it starts" in error.value.problems[1]


def test_a_history_over_three_years_is_refused_naming_its_two_ends():
    """Two rows two centuries apart asked the reader for 1.7 million hours one by one (and a
    job as long, a loop over each of them): the page's worker was held for minutes."""
    text = ("ts,gpus\n2026-08-01T00:00:00Z,4\n1971-01-01T00:00:00Z,4\n"
            "2199-12-31T23:00:00Z,4\n")
    with pytest.raises(HistoryError) as error:
        read_history(text, gaps_as_idle=True)
    assert error.value.problems == [
        "lines 3 and 4: the rows span 83,640 days, from 1971-01-01 00:00 to 2199-12-31 23:00 "
        "UTC; at most 1,096 days (three years) are read: give the most recent three years"]
    jobs = SACCT + ("1|a|u|2026-08-01T00:00:00|2026-08-02T00:00:00|gres/gpu=2\n"
                    "2|a|u|2020-01-01T00:00:00|2199-01-01T00:00:00|gres/gpu=1\n")
    with pytest.raises(HistoryError, match="^lines 3 and 3: the jobs span 65,379 days"):
        read_history(jobs, zone=UTC)
    three_years = SACCT + "1|a|u|2024-01-01T00:00:00|2026-12-31T00:00:00|gres/gpu=2\n"
    assert sum(read_history(three_years, zone=UTC).hours) == 2 * 1095 * 24


def test_times_a_datetime_cannot_hold_and_absurd_gpu_counts_are_named():
    """Year 1 at +08:00 is before the first instant a datetime holds (OverflowError), and
    five thousand digits are past what int() reads (ValueError): both escaped as a 500."""
    with pytest.raises(HistoryError) as error:
        read_history("ts,gpus\n0001-01-01T00:00:00+08:00,4\n9999-12-31T23:00:00-08:00,4\n")
    assert [p[:42] for p in error.value.problems] == [
        "line 2: '0001-01-01T00:00:00+08:00' is not",
        "line 3: '9999-12-31T23:00:00-08:00' is not"]
    with pytest.raises(HistoryError, match="^line 2: Start '0001-01-01T00:00:00' or End"):
        read_history(SACCT + "1|a|u|0001-01-01T00:00:00|0001-01-01T02:00:00|gres/gpu=2\n",
                     zone=ZoneInfo("Asia/Shanghai"))
    with pytest.raises(HistoryError, match="^line 2: gres/gpu=9{20} is not a number of GPUs"):
        read_history(SACCT + f"1|a|u|2026-08-01T00:00:00|2026-08-01T02:00:00|"
                             f"gres/gpu={'9' * 5000}\n", zone=UTC)


def test_counts_only_in_ascii_figures_are_read():
    """float() and int() read other scripts' digits and underscores: an Arabic-Indic three
    was three GPUs, and '1_0' ten."""
    with pytest.raises(HistoryError) as error:
        read_history("ts,gpus\n2026-08-01T00:00:00Z,\u0663\n2026-08-01T01:00:00Z,1_0\n")
    assert [p.split(" of GPUs")[0] for p in error.value.problems] == [
        "line 2: gpus '\u0663' is not a number", "line 3: gpus '1_0' is not a number"]
    with pytest.raises(HistoryError, match="^line 2: gres/gpu=\u0663 is not a number of GPUs"):
        read_history(SACCT + "1|a|u|2026-08-01T00:00:00|2026-08-01T02:00:00|gres/gpu=\u0663\n",
                     zone=UTC)
    tres = "billing=4,cpu=4,gres/gpu:h100=2,gres/gpu=2,mem=8G"
    read = read_history(SACCT + f"1|a|u|2026-08-01T00:00:00|2026-08-01T02:00:00|{tres}\n", zone=UTC)
    assert read.hours == [2.0, 2.0]


def test_the_page_answers_a_file_it_will_not_read_at_once(client, operator, catalogue):
    client.force_login(operator)
    upload = SimpleUploadedFile("wide.csv", b"ts,gpus\n1971-01-01T00:00:00Z,1\n"
                                            b"2199-12-31T23:00:00Z,1\n", "text/csv")
    answer = client.post("/en/advise/", {"history": upload, "time_zone": "UTC",
                                         "term_months": 12, "gaps_as_idle": "on"})
    assert answer.status_code == 400
    assert b"at most 1,096 days (three years) are read" in answer.content


def test_the_chinese_page_names_the_rows_in_chinese(client, operator, catalogue):
    client.force_login(operator)
    upload = SimpleUploadedFile("bad.csv", b"ts,gpus\n2026-08-01T00:00:00Z,lots\n", "text/csv")
    answer = client.post("/zh-hans/advise/", {"history": upload, "time_zone": "UTC",
                                              "term_months": 12})
    assert answer.status_code == 400
    assert "第 2 行：gpus 'lots' 不是 0 到 1,000,000 之间的 GPU 数" in html.unescape(
        answer.content.decode())



def test_without_an_on_demand_plan_the_page_prices_it_at_the_dearest_overage_and_says_so(
        client, operator, db):
    """Every upload was refused with the page's defaults where no plan without a commitment
    was offered: on demand is now priced at the catalogue's highest overage rate, said with
    the advice; with no plan at all the page asks for the price in its own field."""
    client.force_login(operator)
    upload = SimpleUploadedFile("month.csv", hourly_csv(800).encode(), "text/csv")
    answer = client.post("/en/advise/", {"history": upload, "time_zone": "UTC",
                                         "term_months": 12})
    assert answer.status_code == 400
    assert answer.context["form"].errors["on_demand_rate"] == [
        "no CNY plan is offered to price the on-demand use: give it here."]
    assert answer.context["kept"]["name"] == "month.csv"  # the file is not asked for again
    Plan.objects.create(name="Guaranteed 8", base_quota_gpus=8, max_quota_gpus=16,
                        committed_gpu_hours=Decimal(4000), committed_rate=Decimal(10),
                        overage_rate=Decimal("13.5"), term_months=12, currency="CNY")
    answer = client.post("/en/advise/", {"kept": answer.context["kept"]["token"],
                                         "time_zone": "UTC", "term_months": 12})
    assert answer.status_code == 200, answer.context["form"].errors
    assert answer.context["result"].on_demand.overage_rate == Decimal("13.5")
    text = html.unescape(answer.content.decode())
    assert "priced at the catalogue's highest overage rate, 13.50 CNY a GPU-hour" in text


def test_a_refused_form_keeps_the_file_and_names_the_pages_own_checkbox(client, operator,
                                                                       catalogue):
    """Hours without a row, and bad rows, are said at once; the way out is the page's
    checkbox, not the command's option; the file is kept for the next try, for its
    uploader only."""
    client.force_login(operator)
    text = hourly_csv(800, skip={5}).replace("2026-08-01T10:00:00+00:00,4.0", "x,4.0")
    upload = SimpleUploadedFile("gappy.csv", text.encode(), "text/csv")
    answer = client.post("/en/advise/", {"history": upload, "time_zone": "UTC",
                                         "term_months": 12})
    assert answer.status_code == 400
    problems = answer.context["problems"]
    assert any(p.startswith("line 11: 'x'") for p in problems)
    assert any("(1 hour)" in p and "Read hours without a row as idle" in p for p in problems)
    assert not any("--gaps-as-idle" in p for p in problems)
    token = answer.context["kept"]["token"]
    again = client.post("/en/advise/", {"kept": token, "time_zone": "UTC", "term_months": 12,
                                        "gaps_as_idle": "on"})
    assert again.status_code == 400 and again.context["kept"]["token"] == token
    assert not any("hour" in p and "idle" in p for p in again.context["problems"])
    client.force_login(make_user("someone-else", staff=True))
    stranger = client.post("/en/advise/", {"kept": token, "time_zone": "UTC",
                                           "term_months": 12})
    assert "history" in stranger.context["form"].errors  # not theirs to read


jobs = st.lists(st.tuples(st.integers(0, 500 * 60), st.integers(1, 200 * 60),
                          st.integers(1, 16)), min_size=1, max_size=30)


@given(jobs=jobs)
@settings(max_examples=examples(200), deadline=None)
def test_sacct_hours_hold_every_job_s_gpu_time_and_never_more_than_ran(jobs):
    """Brute force: each job's GPUs times its minutes, and each hour holds exactly the GPU
    time of the jobs in it, minute by minute (so never more GPUs than ran in it)."""
    lines = []
    for n, (start, minutes, gpus) in enumerate(jobs):
        began = T0 + timedelta(minutes=start)
        lines.append(f"{n}|a|u|{began:%Y-%m-%dT%H:%M:%S}|"
                     f"{began + timedelta(minutes=minutes):%Y-%m-%dT%H:%M:%S}|gres/gpu={gpus}")
    history = read_history(SACCT + "\n".join(lines), zone=UTC)
    total = sum(minutes * gpus for _s, minutes, gpus in jobs) / 60
    assert sum(history.hours) == pytest.approx(total)
    for k, held in enumerate(history.hours):
        hour = history.start + timedelta(hours=k)
        k0 = int((hour - T0).total_seconds()) // 60  # the hour's first minute
        minutes = sum(g * max(0, min(s + m, k0 + 60) - max(s, k0)) for s, m, g in jobs)
        most = sum(g for s, m, g in jobs
                   if T0 + timedelta(minutes=s) < hour + timedelta(hours=1)
                   and T0 + timedelta(minutes=s + m) > hour)
        assert held == pytest.approx(minutes / 60) and held <= most + 1e-9


@pytest.fixture
def catalogue(db):
    Plan.objects.create(name="On demand", base_quota_gpus=0, max_quota_gpus=64,
                        committed_gpu_hours=Decimal(0), committed_rate=Decimal(14),
                        overage_multiplier=Decimal(1), term_months=1, currency="CNY")
    Plan.objects.create(name="Guaranteed 8", base_quota_gpus=8, max_quota_gpus=16,
                        committed_gpu_hours=Decimal(4000), committed_rate=Decimal(10),
                        term_months=12, currency="CNY")
    Plan.objects.create(name="Small 2", base_quota_gpus=2, max_quota_gpus=2,
                        committed_gpu_hours=Decimal(1000), committed_rate=Decimal(8),
                        term_months=12, currency="CNY")


def test_the_command_prices_each_plan_over_the_term_and_advises_the_cheapest_that_fits(
        tmp_path, catalogue, capsys):
    path = tmp_path / "usage.csv"
    path.write_text(hourly_csv(24 * 60, lambda k: 6 + (k % 24 >= 9) * 4))
    call_command("advise", "--history", str(path))
    out = capsys.readouterr().out
    assert "1,440 hours (csv)" in out
    assert "Small 2: commit 1,460 GPU-h a period" in out and "below the peak" in out
    assert "Advice: sign Guaranteed 8 committing" in out

    call_command("advise", "--history", str(path), "--json")
    body = json.loads(capsys.readouterr().out)
    assert body["advised"] == "Guaranteed 8" and body["term_months"] == 12
    assert body["on_demand"]["overage_rate"] == "14.0000"
    plans = {p["name"]: p for p in body["plans"]}
    guaranteed = plans["Guaranteed 8"]
    assert Decimal(guaranteed["p10"]) <= Decimal(guaranteed["p50"]) <= Decimal(guaranteed["p90"])
    assert Decimal(guaranteed["p50"]) < Decimal(body["on_demand"]["p50"])
    assert not plans["Small 2"]["fits_peak"]


def test_the_command_answers_what_it_cannot_use_clearly(tmp_path, db):
    short = tmp_path / "short.csv"
    short.write_text(hourly_csv(100))
    with pytest.raises(CommandError, match="holds 100 hours; at least a period"):
        call_command("advise", "--history", str(short), "--on-demand-rate", "14")
    month = tmp_path / "month.csv"
    month.write_text(hourly_csv(800))
    with pytest.raises(CommandError, match="give it \\(--on-demand-rate\\)"):
        call_command("advise", "--history", str(month))
    with pytest.raises(CommandError, match="no such file"):
        call_command("advise", "--history", str(tmp_path / "none.csv"))
    with pytest.raises(CommandError, match="--on-demand-rate must be a price above 0"):
        call_command("advise", "--history", str(month), "--on-demand-rate", "-3")
    with pytest.raises(CommandError, match="is not a time zone"):
        call_command("advise", "--history", str(month), "--time-zone", "Mars/Olympus")


@pytest.fixture
def slurm_history(catalogue, tenant):
    """Sixty days of a Slurm account of the tenant's in imported accounting: 6 GPUs held
    around the clock and 4 more in working hours."""
    from metering.models import AttributionRule, Cluster
    from metering.schedulers.slurm.accounting import import_jobs
    from metering.schedulers.slurm.sacct import Job

    cluster = Cluster.objects.create(name="hpc", kind=Cluster.Kind.SLURM)
    AttributionRule.objects.create(tenant=tenant, cluster=cluster, value="team-a",
                                   field=AttributionRule.Field.ACCOUNT)
    start = (datetime.now(UTC) - timedelta(days=60)).replace(minute=0, second=0, microsecond=0)
    jobs = [Job("base", "team-a", "alice", 6, start, start + timedelta(days=60), "COMPLETED")]
    jobs += [Job(f"day-{d}", "team-a", "bob", 4, start + timedelta(days=d, hours=9),
                 start + timedelta(days=d, hours=17), "COMPLETED") for d in range(60)]
    import_jobs(cluster, jobs, start + timedelta(days=61))
    return cluster


def test_a_tenant_without_a_contract_is_advised_from_its_imported_slurm_accounting(
        slurm_history, capsys):
    call_command("advise", "--tenant", "vision", "--json")
    body = json.loads(capsys.readouterr().out)
    assert body["source"] == "slurm accounting"
    assert body["history_hours"] >= 60 * 24 and body["peak_gpus"] == 10.0
    assert body["advised"] == "Guaranteed 8"


def test_advice_from_slurm_needs_an_import(tenant, catalogue):
    with pytest.raises(CommandError, match="holds no job of this tenant's accounts"):
        call_command("advise", "--tenant", "vision")
    with pytest.raises(CommandError, match="No tenant 'nope'"):
        call_command("advise", "--tenant", "nope")


def test_the_leads_page_offers_the_imported_history(slurm_history, client, lead):
    client.force_login(lead)
    page = client.get("/en/tenants/vision/advise/")
    assert b'id="from-slurm"' in page.content
    answer = client.post("/en/tenants/vision/advise/", {
        "source": "slurm", "term_months": 12, "time_zone": "UTC"})
    assert answer.status_code == 200, answer.content[:2000]
    assert answer.context["result"].source == "slurm accounting"
    assert answer.context["result"].advised == "Guaranteed 8"


def test_a_tenant_without_slurm_history_is_not_offered_it(tenant, catalogue, client, lead):
    client.force_login(lead)
    assert b'id="from-slurm"' not in client.get("/en/tenants/vision/advise/").content
    refused = client.post("/en/tenants/vision/advise/", {"source": "slurm", "term_months": 12,
                                                         "time_zone": "UTC"})
    assert refused.status_code == 400  # no file, and no Slurm history to read instead


def test_a_field_past_csvs_size_limit_is_named_not_a_server_error(client, operator, catalogue):
    text = "ts,gpus\n2026-08-01T00:00:00Z,1\n2026-08-01T01:00:00Z," + "9" * 200_000 + "\n"
    with pytest.raises(HistoryError) as error:
        read_history(text)
    assert error.value.problems == [
        "line 3: a field is longer than 128 KiB; no usage history has one"]
    client.force_login(operator)
    upload = SimpleUploadedFile("long.csv", text.encode(), "text/csv")
    answer = client.post("/en/advise/", {"history": upload, "time_zone": "UTC",
                                         "term_months": 12})
    assert answer.status_code == 400
    assert b"a field is longer than 128 KiB" in answer.content


def test_a_file_the_proxy_would_pass_is_read_and_one_over_the_limit_refused(
        client, operator, catalogue):
    client.force_login(operator)
    big = SimpleUploadedFile("big.csv", b"ts,gpus\n" + b" " * (8 * 2**20), "text/csv")
    answer = client.post("/en/advise/", {"history": big, "time_zone": "UTC",
                                         "term_months": 12})
    assert answer.status_code == 400
    assert b"The file is larger than 8 MiB." in answer.content


def test_a_user_asking_too_often_is_told_when_to_ask_again(client, operator, catalogue,
                                                           settings):
    settings.ADVICE_UPLOADS_PER_MINUTE = 2
    client.force_login(operator)
    with time_machine.travel("2026-12-04 10:00:10Z", tick=False):
        answers = []
        for _ in range(3):
            upload = SimpleUploadedFile("month.csv", hourly_csv(800).encode(), "text/csv")
            answers.append(client.post("/en/advise/", {
                "history": upload, "time_zone": "UTC", "term_months": 12}))
    assert [a.status_code == 429 for a in answers] == [False, False, True]
    assert answers[2]["Retry-After"] == "50"
    assert b"You have asked 2 times this minute; ask again in 50 seconds." in answers[2].content


def test_a_bad_row_is_named_once_and_the_kept_file_is_said_as_kept(client, operator, catalogue):
    """A row refused for its figure was named, then its hour named again as missing; the
    first refusal said "Using bad.csv, the file you gave before"; on demand showed a
    committed rate of 0.00."""
    client.force_login(operator)
    text = hourly_csv(800).replace("2026-08-01T10:00:00+00:00,4.0",
                                   "2026-08-01T10:00:00+00:00,abc")
    answer = client.post("/en/advise/", {
        "history": SimpleUploadedFile("bad.csv", text.encode(), "text/csv"),
        "time_zone": "UTC", "term_months": 12})
    assert answer.status_code == 400
    assert answer.context["problems"] == [
        "line 12: gpus 'abc' is not a number of GPUs from 0 to 1,000,000"]
    page = html.unescape(answer.content.decode())
    assert "bad.csv is kept for your next try" in page and "the file you gave before" not in page
    again = client.post("/en/advise/", {"kept": answer.context["kept"]["token"],
                                        "time_zone": "UTC", "term_months": 12})
    assert "Using bad.csv, the file you gave before" in html.unescape(again.content.decode())
    fine = client.post("/en/advise/", {
        "history": SimpleUploadedFile("fine.csv", hourly_csv(800).encode(), "text/csv"),
        "time_zone": "UTC", "term_months": 12})
    row = html.unescape(fine.content.decode()).split('data-option="on demand"')[1].split("</tr>")[0]
    assert "<td class=\"num\">–</td>" in row


def test_a_leads_advice_compares_with_the_contract_in_force(client, lead, contract, catalogue):
    client.force_login(lead)
    answer = client.post("/en/tenants/vision/advise/", {
        "history": SimpleUploadedFile("fine.csv", hourly_csv(800).encode(), "text/csv"),
        "time_zone": "UTC", "term_months": 12})
    assert answer.status_code == 200
    [current] = [o for o in answer.context["result"].plans if o.current]
    terms = contract.terms_at(timezone.now())
    assert current.commitment == terms.committed_gpu_hours
    assert current.name == f"Current contract ({contract.plan.name})"
    assert "what you have" in answer.content.decode()
