"""Hourly GPU usage read from a file a team already has, for advice before any contract: a CSV
of `ts,gpus` (GPUs in use each hour) or Slurm's `sacct -P` output (JobID, Account, User,
Start, End, AllocTRES), whose jobs are spread over the hours they ran. Text in, hours and
named problems out, in the active language (a lead reads them on the page): a service, not
loans.maths, for that translation; it touches no database.

Every row that cannot be read is named with its line; hours a CSV leaves out are named as gaps
(they may be idle hours or lost data, and only the team knows which), so nothing is guessed.
"""

import csv
import io
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo

from django.utils.translation import gettext as _

from metering.schedulers import gpus_of, spread_seconds  # pure: no model

HOUR = timedelta(hours=1)
SACCT_COLUMNS = ("JobID", "Account", "User", "Start", "End", "AllocTRES")
MAX_PROBLEMS = 20  # named one by one; the rest are counted
# A history spans at most three years: more says nothing more about a term to sign, and the
# hours are held one by one (a file of two rows a thousand years apart would ask for millions).
MAX_SPAN_DAYS = 1096
EARLIEST, LATEST = datetime(1970, 1, 1, tzinfo=UTC), datetime(2200, 1, 1, tzinfo=UTC)


class HistoryError(ValueError):
    """The file cannot be read as usage; `problems` names what is wrong, line by line."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass
class History:
    start: datetime  # the first hour, UTC
    hours: list[float]  # GPUs in use each hour from `start`
    source: str  # "csv" or "sacct"
    skipped: list[str] = field(default_factory=list)  # what was left out on purpose, and why

    @property
    def end(self) -> datetime:
        return self.start + HOUR * len(self.hours)


def read_history(text: str, *, zone: tzinfo = UTC, gaps_as_idle: bool = False,
                 account: str = "", idle_option: str = "--gaps-as-idle") -> History:
    """`text` as a CSV of `ts,gpus` or as `sacct -P` output (told apart by the header);
    `idle_option` is how the caller's reader says "read missing hours as idle"."""
    lines = text.lstrip("\ufeff").splitlines()
    header = lines[0].strip() if lines else ""
    if header.replace(" ", "").lower() == "ts,gpus":
        return _csv(lines, gaps_as_idle, idle_option)
    if header.split("|")[:len(SACCT_COLUMNS)] == list(SACCT_COLUMNS):
        return _sacct(lines, zone, account)
    raise HistoryError([_(
        "line 1: expected the header ts,gpus (hourly usage) or the sacct -P columns "
        "%(columns)s (sacct -P -o %(options)s); found %(header)s") % {
        "columns": "|".join(SACCT_COLUMNS), "options": ",".join(SACCT_COLUMNS),
        "header": repr(header[:80])}])


def _moment(text: str, zone: tzinfo | None) -> datetime:
    """An ISO 8601 time from 1970 to 2199; without an offset it is read in `zone`, or refused
    when None."""
    value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if value.tzinfo is None:
        if zone is None:
            raise ValueError("no UTC offset")
        value = value.replace(tzinfo=zone)
    try:
        value = value.astimezone(UTC)
    except OverflowError:  # year 1 or 9999 moved by its offset past what a datetime holds
        raise ValueError("out of range") from None
    if not EARLIEST <= value < LATEST:
        raise ValueError("out of range")
    return value


def _span_problem(first: tuple[datetime, int], last: tuple[datetime, int], what: str) -> str:
    """The refusal of a history longer than MAX_SPAN_DAYS: its two ends, with their lines."""
    (start, start_line), (end, end_line) = first, last
    figures = {"first": start_line, "last": end_line, "days": f"{(end - start).days:,}",
               "start": f"{start:%Y-%m-%d %H:%M}", "end": f"{end:%Y-%m-%d %H:%M}",
               "most": f"{MAX_SPAN_DAYS:,}"}
    return (_("lines %(first)s and %(last)s: the rows span %(days)s days, from %(start)s to "
              "%(end)s UTC; at most %(most)s days (three years) are read: give the most "
              "recent three years") if what == "rows" else
            _("lines %(first)s and %(last)s: the jobs span %(days)s days, from %(start)s to "
              "%(end)s UTC; at most %(most)s days (three years) are read: give the most "
              "recent three years")) % figures


def _stopped(line: int) -> str:
    """Reading ends at the MAX_PROBLEMS-th problem: a file that wrong is not read to its end
    (an 8 MiB one held a web worker for seconds)."""
    return _("reading stopped at line %(line)s after %(most)s problems: correct them and send "
             "the file again") % {"line": line, "most": MAX_PROBLEMS}


def _named(problems: list[str]) -> list[str]:
    if len(problems) > MAX_PROBLEMS:
        return [*problems[:MAX_PROBLEMS],
                _("and %(count)s more") % {"count": len(problems) - MAX_PROBLEMS}]
    return problems


def _rows(lines: list[str]):
    """The CSV's rows, then None in place of one csv cannot read (a field past its size
    limit), after which nothing more is read."""
    reader = csv.reader(io.StringIO("\n".join(lines)))
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error:
            yield None
            return
        yield row


def _csv(lines: list[str], gaps_as_idle: bool, idle_option: str) -> History:
    usage: dict[datetime, float] = {}
    lines_of: dict[datetime, int] = {}
    refused: set[datetime] = set()  # hours whose row was refused for its figure
    problems = []
    for number, row in enumerate(_rows(lines[1:]), start=2):
        if len(problems) >= MAX_PROBLEMS:
            raise HistoryError([*problems, _stopped(number)])
        if row is None:
            problems.append(_("line %(line)s: a field is longer than %(kib)s KiB; no usage "
                              "history has one") % {"line": number,
                                                    "kib": csv.field_size_limit() // 1024})
            break
        if not row or not "".join(row).strip():
            continue
        if len(row) != 2:
            problems.append(_("line %(line)s: expected ts,gpus, found %(count)s fields")
                            % {"line": number, "count": len(row)})
            continue
        try:
            hour = _moment(row[0], None)
        except ValueError:
            problems.append(_("line %(line)s: %(value)s is not an ISO 8601 time with a UTC "
                              "offset (2026-10-01T08:00:00+08:00) from 1970 to 2199")
                            % {"line": number, "value": repr(row[0][:40])})
            continue
        if hour.minute or hour.second or hour.microsecond:
            problems.append(_("line %(line)s: %(value)s is not on the hour")
                            % {"line": number, "value": row[0][:40]})
            continue
        try:  # ASCII figures only: float() would also read "٣" and "1_0"
            gpus = float(row[1]) if row[1].isascii() and "_" not in row[1] else float("nan")
        except ValueError:
            gpus = float("nan")
        if not (0 <= gpus <= 1_000_000):
            problems.append(_("line %(line)s: gpus %(value)s is not a number of GPUs from 0 "
                              "to 1,000,000") % {"line": number, "value": repr(row[1][:20])})
            refused.add(hour)  # said once: its hour is not a gap as well
            continue
        if hour in usage:
            problems.append(_("line %(line)s: %(hour)s UTC is given twice")
                            % {"line": number, "hour": f"{hour:%Y-%m-%d %H:%M}"})
            continue
        usage[hour] = gpus
        lines_of[hour] = number
    if not usage and not problems:
        problems.append(_("the file has no rows after its header"))
    if not usage:
        raise HistoryError(_named(problems))
    start, last = min(usage), max(usage)
    if last - start > timedelta(days=MAX_SPAN_DAYS):
        raise HistoryError([_span_problem((start, lines_of[start]), (last, lines_of[last]),
                                          "rows")])
    count = int((last - start) / HOUR) + 1
    hours = [usage.get(start + HOUR * k) for k in range(count)]
    gaps = _gaps(start, [0.0 if h is None and start + HOUR * k in refused else h
                         for k, h in enumerate(hours)])
    if gaps and not gaps_as_idle:  # said with the bad rows, all at once
        problems += [_gap_problem(a, b, n, idle_option) for a, b, n in gaps]
    if problems:
        raise HistoryError(_named(problems))
    skipped = [_("%(count)s hours without a row from %(first)s UTC read as idle")
               % {"count": n, "first": f"{a:%Y-%m-%d %H:%M}"} for a, _b, n in gaps]
    return History(start, [h or 0.0 for h in hours], "csv", skipped)


def _gap_problem(first: datetime, last: datetime, count: int, idle_option: str) -> str:
    if count == 1:
        return _("no row for %(hour)s UTC (1 hour): give it (0 where nothing ran), or read it "
                 "as idle (%(option)s)") % {"hour": f"{first:%Y-%m-%d %H:%M}",
                                            "option": idle_option}
    return _("no row for %(first)s to %(last)s UTC (%(count)s hours): give them (0 where "
             "nothing ran), or read them as idle (%(option)s)") % {
        "first": f"{first:%Y-%m-%d %H:%M}", "last": f"{last:%Y-%m-%d %H:%M}",
        "count": f"{count:,}", "option": idle_option}


def _gaps(start: datetime, hours: list[float | None]) -> list[tuple[datetime, datetime, int]]:
    out, k = [], 0
    while k < len(hours):
        if hours[k] is None:
            first = k
            while k < len(hours) and hours[k] is None:
                k += 1
            out.append((start + HOUR * first, start + HOUR * (k - 1), k - first))
        k += 1
    return out


def _sacct(lines: list[str], zone: tzinfo, account: str) -> History:
    jobs: list[tuple[datetime, datetime, int, int]] = []  # start, end, GPUs, line
    problems, skipped, steps, running, other = [], [], 0, 0, 0
    width = len(lines[0].split("|"))
    for number, line in enumerate(lines[1:], start=2):
        if len(problems) >= MAX_PROBLEMS:
            raise HistoryError([*problems, _stopped(number)])
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != width:
            problems.append(_("line %(line)s: expected %(width)s fields, found %(count)s")
                            % {"line": number, "width": width, "count": len(fields)})
            continue
        job, job_account, _user, start, end, tres = fields[:6]
        if "." in job:  # a step (batch, extern, 0): its job's allocation is counted once
            steps += 1
            continue
        if account and job_account != account:
            other += 1
            continue
        try:
            gpus = gpus_of(tres)
        except ValueError as error:  # not ASCII digits, or more than seven of them
            problems.append(_("line %(line)s: gres/gpu=%(value)s is not a number of GPUs a "
                              "job holds") % {"line": number, "value": str(error)[:20]})
            continue
        if gpus == 0:
            continue  # a job without GPUs
        if end.strip() in ("Unknown", "None", ""):
            running += 1
            continue
        try:
            began, ended = _moment(start, zone), _moment(end, zone)
        except ValueError:
            problems.append(_("line %(line)s: Start %(start)s or End %(end)s is not a time "
                              "from 1970 to 2199 (sacct prints 2026-10-01T08:00:00)")
                            % {"line": number, "start": repr(start[:30]), "end": repr(end[:30])})
            continue
        if ended < began:
            problems.append(_("line %(line)s: job %(job)s ends before it starts")
                            % {"line": number, "job": job[:40]})
            continue
        jobs.append((began, ended, gpus, number))
    if problems:
        raise HistoryError(_named(problems))
    if not jobs:
        raise HistoryError([
            _("no finished job with GPUs (gres/gpu in AllocTRES) for account %(account)s")
            % {"account": account} if account else
            _("no finished job with GPUs (gres/gpu in AllocTRES)")])
    earliest = min(jobs, key=lambda job: job[0])
    latest = max(jobs, key=lambda job: job[1])
    if latest[1] - earliest[0] > timedelta(days=MAX_SPAN_DAYS):
        raise HistoryError([_span_problem((earliest[0], earliest[3]), (latest[1], latest[3]),
                                          "jobs")])
    first = earliest[0].replace(minute=0, second=0, microsecond=0)
    hours = _spread(first, int((latest[1] - first) / HOUR) + 1, jobs)
    while hours and hours[-1] == 0:
        hours.pop()
    for count, why in ((steps, _("%(count)s job steps (their jobs are counted)")),
                       (running, _("%(count)s jobs still running (no End)")),
                       (other, _("%(count)s jobs of other accounts than %(account)s"))):
        if count:
            skipped.append(why % {"count": count, "account": account})
    return History(first, hours, "sacct", skipped)


def _spread(first: datetime, count: int, jobs: list[tuple[datetime, datetime, int, int]]
            ) -> list[float]:
    """GPUs in use each of `count` hours from `first`: each job's GPU-seconds in each hour
    (Slurm's one spreader, metering.schedulers.slurm.sacct), as GPUs held the hour long."""
    held = spread_seconds(first, count,
                          [(began, ended, gpus) for began, ended, gpus, _line in jobs])
    return [seconds / HOUR.total_seconds() for seconds in held]
