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


AGENT = ROOT / "agent"
SERVER = {"django", "rest_framework", "celery", "psycopg", "plotly", "kombu", "redis",
          "gunicorn", "whitenoise", "config", "core", "loans", "metering"}
# What the agent may import besides the standard library and itself: NVML's bindings, and
# gRPC with protocol buffers for the kubelet source (the `kubelet` extra).
THIRD_PARTY = {"pynvml": "nvidia-ml-py", "grpc": "grpcio", "google": "protobuf"}


def test_the_agents_distribution_declares_what_it_imports_and_nothing_of_the_server():
    """agent/pyproject.toml is what `pip install ./agent` resolves: every module the agent's
    code imports is the standard library's, its own, or a declared requirement."""
    import ast
    import tomllib

    project = tomllib.loads((AGENT / "pyproject.toml").read_text())["project"]
    declared = {r.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip()
                for r in project["dependencies"]
                + [r for extra in project["optional-dependencies"].values() for r in extra]}
    assert declared == set(THIRD_PARTY.values())
    imported = set()
    for path in AGENT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module.split(".")[0])
    outside = imported - set(sys.stdlib_module_names) - {"agent"}
    assert outside <= set(THIRD_PARTY), outside - set(THIRD_PARTY)
    assert not imported & SERVER


def test_pip_install_of_the_agent_puts_none_of_the_server_on_a_gpu_node(tmp_path):
    """In an empty virtual environment, as on a GPU server: the resolved set, and one batch."""
    import json
    import shutil

    source = tmp_path / "agent"  # a copy: pip builds in the tree it is given
    shutil.copytree(AGENT, source, ignore=shutil.ignore_patterns("__pycache__", "build",
                                                                 "*.egg-info"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "--quiet", str(source)], check=True, timeout=300,
                   capture_output=True)
    listed = subprocess.run([*pip, "list", "--format=json"], check=True, capture_output=True,
                            text=True, timeout=60)
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert {"gpuloans-agent", "nvidia-ml-py"} <= names
    assert not names & {"django", "celery", "psycopg", "psycopg-binary", "plotly",
                        "djangorestframework", "kombu", "redis", "gunicorn"}, names
    batch = subprocess.run([str(venv / "bin" / "gpuloans-agent"), "--collector", "fake:4",
                            "--once", "--interval", "2", "--poll", "1", "--node", "n1"],
                           cwd=tmp_path, check=True, capture_output=True, text=True,
                           timeout=60)
    assert len(json.loads(batch.stdout)["samples"]) == 4
