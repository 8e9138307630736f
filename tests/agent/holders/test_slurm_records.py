"""The Slurm source from the prolog's and epilog's records (deploy/slurm/): what they write,
run as slurmd runs them, and what the agent reads from them; hostile or broken records."""

import json
import logging
import os
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent.cli import holders_for, parser
from agent.holders import HolderError
from agent.holders.slurm import SlurmSource
from agent.holders.slurm_records import SlurmRecordsSource, parse
from agent.readings import Reading

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "slurm"


def run(script: str, folder: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([DEPLOY / f"gpuloans-{script}"], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "GPULOANS_SLURM_RECORDS": str(folder),
                               **env}, timeout=30, check=False)


def gpus(count: int = 4) -> list[Reading]:
    return [Reading(uuid=f"GPU-{k}", index=k) for k in range(count)]


def test_the_prolog_records_a_job_and_the_epilog_ends_it(tmp_path):
    folder = tmp_path / "jobs"
    before = int(datetime.now(UTC).timestamp())
    done = run("prolog", folder, SLURM_JOB_ID="41", SLURM_JOB_ACCOUNT="team-a",
               SLURM_JOB_USER="alice", SLURM_JOB_GPUS="1,3", SLURM_JOB_NAME="x\njob=9")
    assert done.returncode == 0 and done.stdout == done.stderr == ""
    assert sorted(p.name for p in folder.iterdir()) == ["41"]  # no part file left
    record = parse((folder / "41").read_text(), "41")
    assert (record.job.account, record.job.user, record.job.gpus) == ("team-a", "alice", (1, 3))
    assert record.job.start.timestamp() >= before and record.end is None
    seen = mine(folder).read().apply(gpus())
    assert [(r.owner or {}).get("job") for r in seen] == [None, "41", None, "41"]
    assert seen[1].since == record.job.start and seen[1].owner["account"] == "team-a"
    assert run("epilog", folder, SLURM_JOB_ID="41").returncode == 0
    assert sorted(p.name for p in folder.iterdir()) == ["41.ended"]
    seen = mine(folder).read().apply(gpus())
    assert not any(r.allocated for r in seen)
    assert seen[1].since == parse((folder / "41.ended").read_text(), "41").end  # let go then


@pytest.mark.parametrize("env", [
    {"SLURM_JOB_ID": "42"},  # no GPU on this node
    {"SLURM_JOB_ID": "../x", "SLURM_JOB_GPUS": "0"},  # not a job id
    {"SLURM_JOB_GPUS": "0"},
])
def test_the_prolog_records_nothing_it_should_not_and_never_fails_a_job(tmp_path, env):
    folder = tmp_path / "jobs"
    assert run("prolog", folder, **env).returncode == 0
    assert not folder.exists() or list(folder.iterdir()) == []


def test_the_scripts_exit_0_even_where_they_cannot_write(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": "0"}
    assert run("prolog", blocked / "jobs", **env).returncode == 0
    assert run("epilog", blocked / "jobs", **env).returncode == 0


def test_the_epilog_deletes_records_ended_over_an_hour_ago(tmp_path):
    folder = tmp_path / "jobs"
    folder.mkdir()
    (folder / "5.ended").write_text("")
    (folder / "6.ended").write_text("")
    os.utime(folder / "5.ended", (0, datetime.now(UTC).timestamp() - 3700))
    run("epilog", folder, SLURM_JOB_ID="8")
    assert [p.name for p in folder.iterdir()] == ["6.ended"]


def read_twice(source: SlurmRecordsSource, caplog) -> list[Reading]:
    """Two polls of the source, its warnings caught: what the second saw."""
    with caplog.at_level(logging.WARNING, logger="gpuloans-agent"):
        for _ in range(2):
            seen = source.read().apply(gpus())
    return seen


def record(folder: Path, name: str, text: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)


@pytest.mark.parametrize("text", [
    "job=9\naccount=a\nuser=u\ngpus=0\nstart=1764800000\n",  # another job's id
    "job=3\naccount=a\nuser=u\ngpus=all\nstart=1764800000\n",
    "job=3\naccount=a b\nuser=u\ngpus=0\nstart=1764800000\n",
    "job=3\naccount=a\nuser=u\ngpus=0\nstart=soon\n",
    "job=3\naccount=a\nuser=u\ngpus=0\nstart=1764800000\nend=later\n",
    "job=3\naccount=\nuser=u\ngpus=0\nstart=1764800000\n",
    "\x00\xff" * 100,
])
def test_a_record_the_prolog_did_not_write_is_left_out_and_said_once(tmp_path, caplog, text):
    record(tmp_path, "3", text)
    record(tmp_path, "4", "job=4\naccount=a\nuser=u\ngpus=1\nstart=1764800000\n")
    record(tmp_path, "notes.txt", "anything")
    seen = read_twice(mine(tmp_path), caplog)
    assert [(r.owner or {}).get("job") for r in seen] == [None, "4", None, None]
    assert len([m for m in caplog.messages if "not a job record" in m]) == 1


def test_a_gpu_two_unended_records_name_goes_to_the_later_and_it_is_said_once(tmp_path,
                                                                             caplog):
    record(tmp_path, "10", "job=10\naccount=a\nuser=u\ngpus=0-1\nstart=1764800000\n")
    record(tmp_path, "11", "job=11\naccount=b\nuser=v\ngpus=1\nstart=1764803600\n")
    seen = read_twice(mine(tmp_path), caplog)
    assert [(r.owner or {}).get("job") for r in seen] == ["10", "11", None, None]
    assert len([m for m in caplog.messages if "neither ended" in m]) == 1


def test_records_that_cannot_be_read_are_a_holder_error_not_free_gpus(tmp_path):
    with pytest.raises(HolderError, match="prolog installed"):
        SlurmRecordsSource(tmp_path / "missing").read()


def options(*argv: str):
    return parser().parse_args(["--allocation-source", "slurm", *argv])


def test_without_records_the_agent_asks_squeue_no_more_than_once_a_minute(caplog):
    with caplog.at_level(logging.WARNING, logger="gpuloans-agent"):
        holders = holders_for(options())
        assert isinstance(holders.source, SlurmSource) and holders.every == 60
        assert holders_for(options("--allocation-every", "15")).every == 60
        assert holders_for(options("--allocation-every", "300")).every == 300
    assert any("too often" in m for m in caplog.messages)
    assert any("install deploy/slurm's prolog" in m for m in caplog.messages)


def test_with_records_the_agent_reads_them_at_every_poll(tmp_path):
    holders = holders_for(options("--slurm-records", str(tmp_path)))
    assert isinstance(holders.source, SlurmRecordsSource) and holders.every == 0
    kubelet = holders_for(parser().parse_args(["--allocation-source", "kubelet"]))
    assert kubelet.every == 15


# Trust (DESIGN.md): records count only as root wrote them, and only while the job can run.

def mine(folder: Path, **options) -> SlurmRecordsSource:
    """The source, trusting the folder's owner as it trusts root (the tests' user)."""
    return SlurmRecordsSource(folder, owner=os.getuid(), **options)


def test_the_prolog_sets_its_own_umask_so_no_one_else_may_write(tmp_path):
    """With slurmd's umask 000 (and no tmpfiles entry) the folder was drwxrwxrwx, and user
    nobody gave GPUs 1-7 to another account."""
    folder = tmp_path / "jobs"
    subprocess.run(["sh", "-c", f'umask 000; exec "{DEPLOY / "gpuloans-prolog"}"'],
                   env={"PATH": os.environ["PATH"], "GPULOANS_SLURM_RECORDS": str(folder),
                        "SLURM_JOB_ID": "5", "SLURM_JOB_GPUS": "0"}, check=True, timeout=30)
    assert oct(folder.stat().st_mode & 0o777) == "0o755"
    assert oct((folder / "5").stat().st_mode & 0o777) == "0o644"


def test_a_folder_others_may_write_is_not_read_and_the_agent_says_why(tmp_path):
    record(tmp_path / "jobs", "4", "job=4\naccount=a\nuser=u\ngpus=1\nstart=1764800000\n")
    (tmp_path / "jobs").chmod(0o777)
    with pytest.raises(HolderError, match=r"may be written by others than its owner \(mode 0777"):
        mine(tmp_path / "jobs").read()
    (tmp_path / "jobs").chmod(0o755)
    assert mine(tmp_path / "jobs").read().held[1].job == "4"


def test_a_folder_another_user_owns_or_a_link_is_not_read(tmp_path):
    record(tmp_path / "jobs", "4", "job=4\naccount=a\nuser=u\ngpus=1\nstart=1764800000\n")
    with pytest.raises(HolderError, match=f"belongs to uid {os.getuid()}, not {os.getuid() + 1}"):
        SlurmRecordsSource(tmp_path / "jobs", owner=os.getuid() + 1).read()
    (tmp_path / "link").symlink_to(tmp_path / "jobs")
    with pytest.raises(HolderError, match="not a folder but a link"):
        mine(tmp_path / "link").read()


def test_a_record_that_is_a_link_is_left_out_and_said_once(tmp_path, caplog):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("job=4\naccount=victim\nuser=u\ngpus=1\nstart=1764800000\n")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "4").symlink_to(elsewhere)
    seen = read_twice(mine(tmp_path / "jobs"), caplog)
    assert not any(r.allocated for r in seen)
    assert len([m for m in caplog.messages if "symbolic link" in m]) == 1


def test_a_record_naming_gpus_no_node_has_is_left_out_at_once(tmp_path, caplog):
    """gpus=0-20000000 expanded to 20,000,001 indices in 14.2 s."""
    record(tmp_path, "3", "job=3\naccount=a\nuser=u\ngpus=0-20000000\nstart=1764800000\n")
    started = time.monotonic()
    seen = read_twice(mine(tmp_path), caplog)
    assert time.monotonic() - started < 1.0
    assert not any(r.allocated for r in seen)
    assert any("not a job record" in m for m in caplog.messages)


def fake_squeue(folder: Path, *jobs: int) -> SlurmSource:
    """squeue --json listing these jobs; each call is counted in `calls`."""
    answer = json.dumps({"jobs": [{"job_id": j, "job_state": "RUNNING"} for j in jobs]})
    script = folder / "squeue"
    script.write_text(f"#!/bin/sh\necho x >> '{folder / 'calls'}'\necho '{answer}'\n")
    script.chmod(0o755)
    return SlurmSource("node-1", squeue=str(script))


def calls(folder: Path) -> int:
    return len((folder / "calls").read_text().splitlines()) if (folder / "calls").exists() else 0


def test_a_record_whose_epilog_never_ran_ends_when_squeue_no_longer_lists_it(tmp_path, caplog):
    """A record started 30 days ago with no end held GPU 3 for acct-c, 24 GPU-h a day, until
    another job took it. Now squeue is asked (at most once an hour) and the job, gone from it,
    holds nothing from that check; a job squeue lists keeps its GPU."""
    jobs, month_ago = tmp_path / "jobs", int(time.time()) - 30 * 86400
    record(jobs, "7", f"job=7\naccount=acct-c\nuser=u\ngpus=3\nstart={month_ago}\n")
    record(jobs, "8", f"job=8\naccount=acct-d\nuser=u\ngpus=1\nstart={month_ago}\n")
    source = mine(jobs, squeue=fake_squeue(tmp_path, 8))
    before = datetime.now(UTC)
    seen = read_twice(source, caplog)
    assert [(r.owner or {}).get("job") for r in seen] == [None, "8", None, None]
    assert seen[3].since >= before.replace(microsecond=0)  # let go at the check
    assert calls(tmp_path) == 1  # two polls, one question within the hour
    assert len([m for m in caplog.messages if "squeue no longer lists it" in m]) == 1


def test_a_failing_squeue_leaves_the_records_as_they_are_and_is_said_once(tmp_path, caplog):
    jobs = tmp_path / "jobs"
    record(jobs, "7", "job=7\naccount=acct-c\nuser=u\ngpus=3\nstart=1764800000\n")
    source = mine(jobs, squeue=SlurmSource("node-1", squeue=str(tmp_path / "missing")))
    seen = read_twice(source, caplog)
    assert seen[3].owner["job"] == "7"
    assert len([m for m in caplog.messages if "cannot check unended job records" in m]) == 1
