"""The agent against the real server: nothing lost, nothing counted twice."""

import os
import socket
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from agent.client import Backoff, Client
from agent.collectors.fake import FakeCollector
from agent.runner import Agent
from agent.spool import Spool
from metering.models import Node, UsageSample
from tests.helpers import assert_rollups_equal_a_recount, free_port

T0 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=1)


@pytest.fixture
def node(transactional_db):
    node = Node.objects.create(name="fake-node")
    return node, node.issue_token()


def agent_for(server: str, token: str, spool_dir, collector=None, **spool_options) -> Agent:
    return Agent(collector or FakeCollector(4, node="fake-node", seed=3),
                 Spool(spool_dir, **spool_options), Client(server, token, "fake-node", timeout=5),
                 poll_s=5, interval_s=60)


def poll_minutes(agent: Agent, minutes: int, start: datetime = T0) -> None:
    """Polls every 5 s for `minutes`, plus one to close the last interval."""
    for step in range(minutes * 12 + 1):
        agent.poll_once(start + timedelta(seconds=5 * step))


def test_while_the_server_is_down_batches_wait_and_then_arrive_exactly_once(node, tmp_path,
                                                                            live_server):
    _node, token = node
    down = agent_for(f"http://127.0.0.1:{free_port()}", token, tmp_path)
    poll_minutes(down, 5)
    assert down.drain() > 0  # nobody answered: back off, keep everything
    assert len(down.spool.pending()) == 5 and UsageSample.objects.count() == 0

    back = agent_for(live_server.url, token, tmp_path)  # the same spool, the server is back
    assert back.drain() == 0.0
    assert back.spool.pending() == []
    assert UsageSample.objects.count() == 5 * 4
    assert_rollups_equal_a_recount()


def test_an_agent_killed_after_sending_but_before_forgetting_counts_nothing_twice(
    node, tmp_path, live_server
):
    _node, token = node
    agent = agent_for(live_server.url, token, tmp_path)
    poll_minutes(agent, 3)
    [first, *_rest] = agent.spool.pending()
    # The server stores the batch, then the agent dies before removing it from the spool.
    assert agent.client.send(agent.spool.load(first), 0).done
    restarted = agent_for(live_server.url, token, tmp_path)
    assert restarted.drain() == 0.0
    assert UsageSample.objects.count() == 3 * 4
    assert_rollups_equal_a_recount()


def test_a_full_spool_drops_the_oldest_and_reports_them(node, tmp_path, live_server):
    _node, token = node
    agent = agent_for(live_server.url, token, tmp_path, max_bytes=3000)
    poll_minutes(agent, 6)
    kept = sum(len(agent.spool.load(p)) for p in agent.spool.pending())
    assert agent.spool.dropped > 0 and kept + agent.spool.dropped == 6 * 4
    agent.drain()
    stored = Node.objects.get(name="fake-node")
    assert stored.dropped_samples == agent.spool.dropped
    assert UsageSample.objects.count() == kept
    assert Spool(tmp_path).dropped == agent.spool.dropped  # kept across restarts


def test_batches_past_the_horizon_are_given_up_and_reported(tmp_path):
    """The server refuses samples older than its back-fill horizon; the spool gives up a batch
    as old and counts its samples as dropped, and keeps younger ones."""
    spool = Spool(tmp_path, max_age_s=3600)
    old = spool.put([{"n": 1}, {"n": 2}])
    written = time.time_ns() - 2 * 3600 * 10**9
    os.replace(old, old.with_name(f"{written:020d}-{old.name.split('-', 1)[1]}"))
    young = spool.put([{"n": 3}])
    assert spool.pending() == [young]
    assert spool.dropped == 2 and Spool(tmp_path).dropped == 2


def test_a_wrong_token_keeps_the_batches_and_waits_long(node, tmp_path, live_server):
    agent = agent_for(live_server.url, "gpln_wrong", tmp_path)
    poll_minutes(agent, 2)
    assert agent.drain() >= 300
    assert len(agent.spool.pending()) == 2


def test_check_and_once_from_the_command_line(node, tmp_path, live_server, capsys):
    from agent.cli import main

    _node, token = node
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    assert main(["--server", live_server.url, "--token-file", str(token_file), "--node",
                 "fake-node", "--check"]) == 0
    assert capsys.readouterr().out.startswith("ok: 0 accepted")
    assert main(["--collector", "fake:3", "--once", "--node", "fake-node"]) == 0
    assert capsys.readouterr().out.count('"gpu_uuid"') == 3
    token_file.write_text("gpln_wrong")
    assert main(["--server", live_server.url, "--token-file", str(token_file), "--node",
                 "fake-node", "--check"]) == 1


def test_backoff_grows_with_failures_and_honours_retry_after():
    backoff = Backoff(base=1, cap=60)
    assert all(0 <= backoff.failure() <= 60 for _ in range(30))
    assert backoff.failure(at_least=120) == 120
    backoff.success()
    assert backoff.failures == 0


def spooled_keys(folder) -> set[tuple[str, str]]:
    spool = Spool(folder)
    return {(s["gpu_uuid"], s["ts"]) for path in spool.pending() for s in spool.load(path) or []}


def stored_keys() -> set[tuple[str, str]]:
    return {(uuid, ts.isoformat().replace("+00:00", "Z"))
            for uuid, ts in UsageSample.objects.values_list("gpu__uuid", "ts")}


def test_an_agent_process_killed_at_any_moment_loses_and_duplicates_nothing_it_spooled(
    node, tmp_path, live_server
):
    import signal
    import subprocess
    import sys
    import time

    _node, token = node
    token_file = tmp_path / "token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    spool_dir = tmp_path / "spool"
    command = [sys.executable, "-m", "agent.cli", "--collector", "fake:4", "--node", "fake-node",
               "--server", live_server.url, "--token-file", str(token_file), "--spool-dir",
               str(spool_dir), "--poll", "0.1", "--interval", "1"]
    for seconds in (2.5, 1.7):  # two lives, each ended by SIGKILL wherever it happens to be
        agent = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(seconds)
        agent.send_signal(signal.SIGKILL)
        agent.wait(timeout=10)
    promised = stored_keys() | spooled_keys(spool_dir)  # delivered, or waiting on disk
    assert len(promised) >= 4 * 2
    agent_for(live_server.url, token, spool_dir).drain()  # a third life, to empty the spool
    assert stored_keys() == promised
    assert Spool(spool_dir).pending() == []
    assert_rollups_equal_a_recount()


def test_an_unusable_spool_directory_is_a_clear_error_not_a_traceback(tmp_path):
    from agent.cli import main

    token_file = tmp_path / "token"
    token_file.write_text("gpln_x")
    token_file.chmod(0o600)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(SystemExit, match="cannot use the spool directory"):
        main(["--server", "http://127.0.0.1:9", "--token-file", str(token_file),
              "--collector", "fake:1", "--spool-dir", str(blocker / "spool")])


@pytest.mark.parametrize("name", ["bogus", "fake:0", "fake:x", "fake:5000"])
def test_an_unknown_collector_is_refused_by_the_command_line(name, capsys):
    from agent.cli import main

    with pytest.raises(SystemExit):
        main(["--collector", name, "--once"])
    assert "choose nvml, dcgm, nvidia-smi, fake or fake:N" in capsys.readouterr().err


def test_an_answer_cut_off_midway_keeps_the_batch_for_a_retry(node, tmp_path):
    """A server killed while answering: the agent cannot know whether the batch was stored,
    so it keeps it (a resend is answered as duplicates) instead of crashing its sender."""
    _node, token = node
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def answer_half() -> None:
        conn, _ = listener.accept()
        conn.recv(1 << 20)
        conn.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{\"accepted\"")
        conn.close()

    server = threading.Thread(target=answer_half)
    server.start()
    agent = agent_for(f"http://127.0.0.1:{listener.getsockname()[1]}", token, tmp_path)
    poll_minutes(agent, 1)
    assert agent.drain() > 0
    server.join()
    listener.close()
    assert len(agent.spool.pending()) == 1


def test_the_sender_outlives_an_unexpected_error(node, tmp_path, caplog):
    _node, token = node
    agent = agent_for("http://127.0.0.1:9", token, tmp_path)
    calls = []

    def drain() -> float:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a bad moment")
        agent.stopping.set()
        return 0.0

    agent.drain = drain
    agent.backoff = Backoff(base=0.01, cap=0.01)
    agent.send_loop()  # returns once stopping is set; the first error did not end it
    assert len(calls) == 2 and "sending failed unexpectedly" in caplog.text


def test_every_option_says_what_it_does():
    from agent.cli import parser

    for action in parser()._actions:
        assert action.help, f"{action.option_strings} has no help"


def test_the_agent_says_what_it_runs_with_and_stops_cleanly_on_sigterm(tmp_path):
    """One line at start (server, node, collector, interval, spool) and one at stop, and a
    SIGTERM from systemd or Kubernetes ends it cleanly (exit 0), not mid-write."""
    import signal
    import subprocess
    import sys
    import time

    token_file = tmp_path / "token"
    token_file.write_text("gpln_not-a-real-token")
    token_file.chmod(0o600)
    command = [sys.executable, "-m", "agent.cli", "--collector", "fake:2", "--node", "n1",
               "--server", "http://127.0.0.1:9", "--token-file", str(token_file),
               "--spool-dir", str(tmp_path / "spool"), "--poll", "0.1", "--interval", "1"]
    agent = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    time.sleep(1.5)
    agent.send_signal(signal.SIGTERM)
    output, _ = agent.communicate(timeout=20)
    assert agent.returncode == 0, output
    start = next(line for line in output.splitlines() if "node n1" in line)
    for part in ("server http://127.0.0.1:9", "collector fake:2", "a sample every 1 s",
                 f"spool {tmp_path / 'spool'}"):
        assert part in start, start
    assert "gpuloans-agent stopped;" in output.splitlines()[-1], output
