import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_agent_imports_nothing_from_the_web_application():
    code = ("import sys, agent.aggregate, agent.collectors.dcgm, agent.collectors.nvidia_smi, "
            "agent.holders.kubelet, agent.holders.slurm, agent.holders.stand_in, agent.cli; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('django', 'rest_framework', 'celery', 'config', 'loans', 'metering')); "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
