import os
import pwd
from datetime import UTC, datetime

from agent.collectors.fake import FakeCollector
from agent.owners import owner_of


def make_process(proc, pid, uid, cgroup):
    folder = proc / str(pid)
    folder.mkdir(parents=True)
    (folder / "status").write_text(f"Name:\tpython\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
    (folder / "cgroup").write_text(cgroup)


def test_a_kubernetes_pod_process_names_its_user_and_pod_uid(tmp_path):
    make_process(tmp_path, 42, 0, "0::/kubepods.slice/kubepods-burstable.slice/"
                 "kubepods-burstable-pod8f0c2a4e_1b2c_4d5e_8f90_123456789abc.slice/cri-x.scope\n")
    assert owner_of(42, tmp_path) == {"user": pwd.getpwuid(0).pw_name,
                                      "pod": "8f0c2a4e-1b2c-4d5e-8f90-123456789abc"}


def test_a_slurm_job_process_names_its_job(tmp_path):
    make_process(tmp_path, 7, 4242424, "0::/system.slice/slurmstepd.scope/job_1234/step_0\n")
    assert owner_of(7, tmp_path) == {"user": "4242424", "job": "1234"}


def test_a_process_that_has_gone_has_no_owner(tmp_path):
    assert owner_of(99, tmp_path) is None


def test_this_process_is_owned_by_its_user():
    assert owner_of(os.getpid())["user"] == pwd.getpwuid(os.getuid()).pw_name


def test_the_fake_collector_is_seeded_and_realistic():
    at = datetime(2026, 11, 29, 10, 30, tzinfo=UTC)
    first, again = FakeCollector(8, seed=1).poll(at), FakeCollector(8, seed=1).poll(at)
    assert first == again and len(first) == 8
    assert len({r.uuid for r in first}) == 8
    for r in first:
        assert 0 <= r.util_pct <= 100 and 0 <= r.mem_used_mib <= r.mem_total_mib
        assert r.allocated == (r.util_pct > 0 or bool(r.processes))
    assert FakeCollector(8, seed=2).poll(at) != first
