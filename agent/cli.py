"""gpuloans-agent: the command line."""

import argparse
import json
import logging
import os
import signal
import socket
import stat
import sys
from datetime import UTC, datetime
from pathlib import Path

from agent import __version__
from agent.aggregate import Aggregator
from agent.client import Client
from agent.holders import KUBELET_SOCKET, SOURCES, Holders, source_for
from agent.readings import CollectorError
from agent.runner import Agent
from agent.spool import Spool

log = logging.getLogger("gpuloans-agent")
DEFAULT_EVERY_S = 15.0  # the kubelet's: one gRPC call, local


def collector_for(args):
    name = args.collector
    if name.startswith("fake"):
        from agent.collectors.fake import FakeCollector

        count = int(name.split(":", 1)[1]) if ":" in name else args.gpus
        return FakeCollector(count, node=args.node)
    if name == "nvidia-smi":
        from agent.collectors.nvidia_smi import NvidiaSmiCollector

        return NvidiaSmiCollector()
    if name == "dcgm":
        from agent.collectors.dcgm import DcgmCollector

        return DcgmCollector(args.dcgm_url)
    from agent.collectors.nvml import NvmlCollector

    return NvmlCollector()


def collector_name(text: str) -> str:
    """argparse type: nvml, dcgm, nvidia-smi, fake or fake:N (1 to 1024 GPUs)."""
    if text in ("nvml", "dcgm", "nvidia-smi", "fake"):
        return text
    count = text.removeprefix("fake:")
    if text.startswith("fake:") and count.isdigit() and 1 <= int(count) <= 1024:
        return text
    raise argparse.ArgumentTypeError(
        f"{text!r}: choose nvml, dcgm, nvidia-smi, fake or fake:N (N from 1 to 1024)")


def holders_for(args) -> Holders | None:
    """The allocation source the options name, or None for the collector's processes."""
    if args.allocation_every is not None and args.allocation_every < 0:
        raise SystemExit("gpuloans-agent: --allocation-every must be 0 or more seconds")
    source = source_for(args.allocation_source, node=args.node,
                        kubelet_socket=args.kubelet_socket, slurm_node=args.slurm_node,
                        resource_prefix=args.kubelet_resource_prefix,
                        slurm_records=args.slurm_records)
    if source is None:
        return None
    every = args.allocation_every
    if every is None:
        every = max(source.least_every, DEFAULT_EVERY_S if args.allocation_source == "kubelet"
                    else 0.0)
    elif every < source.least_every:
        log.warning("--allocation-every %g s is too often for %s: asking it every %g s",
                    every, source.name, source.least_every)
        every = source.least_every
    if args.allocation_source == "slurm" and not args.slurm_records:
        log.warning("no --slurm-records: asking slurmctld for every job of the cluster "
                    "(squeue --json) every %g s; install deploy/slurm's prolog and epilog to "
                    "learn this node's jobs locally, to the second", every)
    return Holders(source, every=every)


def read_token(path: Path) -> str:
    try:
        mode = path.stat().st_mode
        token = path.read_text().strip()
    except OSError as error:
        raise SystemExit(f"gpuloans-agent: cannot read the token file: {error}") from None
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        logging.warning("%s is readable by other users; chmod 600 it", path)
    if not token:
        raise SystemExit(f"gpuloans-agent: the token file {path} is empty")
    return token


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpuloans-agent", description=(
        "Sample this server's GPUs and post them to gpuloans (agent protocol v1)."))
    p.add_argument("--server", help="gpuloans address, e.g. https://gpuloans.example.com")
    p.add_argument("--token-file", type=Path, help="file holding this node's token")
    p.add_argument("--node", default=socket.gethostname(), help="node name (default: hostname)")
    p.add_argument("--collector", default="nvml", type=collector_name,
                   help="nvml (default), dcgm, nvidia-smi, fake or fake:N")
    p.add_argument("--gpus", type=int, default=8, help="GPUs of the fake collector (default 8)")
    p.add_argument("--dcgm-url", default="http://127.0.0.1:9400/metrics",
                   help="dcgm-exporter's metrics address, for --collector dcgm "
                        "(default http://127.0.0.1:9400/metrics)")
    p.add_argument("--allocation-source", default="processes", choices=SOURCES,
                   help="who holds each GPU: processes (default: a GPU running a process is "
                        "allocated to its owner), kubelet (the pods the kubelet assigned it "
                        "to) or slurm (the jobs Slurm gave it to); utilisation still comes "
                        "from --collector")
    p.add_argument("--kubelet-socket", default=KUBELET_SOCKET,
                   help=f"the kubelet's pod-resources socket, for --allocation-source kubelet "
                        f"(default {KUBELET_SOCKET})")
    p.add_argument("--kubelet-resource-prefix", default="nvidia.com/",
                   help="resources whose devices are GPUs (default nvidia.com/, which holds "
                        "nvidia.com/gpu and the nvidia.com/mig-* resources)")
    p.add_argument("--slurm-node", default=None,
                   help="this node's name in Slurm, for --allocation-source slurm "
                        "(default: --node)")
    p.add_argument("--slurm-records", default=None, metavar="FOLDER",
                   help="for --allocation-source slurm: the folder deploy/slurm's prolog and "
                        "epilog keep job records in (/run/gpuloans/slurm-jobs as shipped), "
                        "read at every poll with no question to slurmctld; without it the "
                        "agent asks squeue --json, at most once a minute")
    p.add_argument("--allocation-every", type=float, default=None,
                   help="seconds between questions to the allocation source; polls in between "
                        "use its last answer (default: 15 for the kubelet, every poll for "
                        "Slurm's records, 60 and no less for squeue --json)")
    p.add_argument("--poll", type=float, default=5.0, help="seconds between polls (default 5)")
    p.add_argument("--interval", type=int, default=60, help="seconds a sample covers (60)")
    p.add_argument("--spool-dir", type=Path, default=Path("/var/lib/gpuloans-agent/spool"),
                   help="where batches wait until the server took them "
                        "(default /var/lib/gpuloans-agent/spool)")
    p.add_argument("--spool-max-mb", type=float, default=100.0,
                   help="the spool's size; past it the oldest batches go first and are "
                        "reported as dropped (default 100)")
    p.add_argument("--spool-max-age-days", type=float, default=7.0,
                   help="batches older than this are given up and reported as dropped: the "
                        "server refuses samples past its back-fill horizon "
                        "(BACKFILL_HORIZON_DAYS; default 7)")
    p.add_argument("--once", action="store_true", help="print one batch as JSON and exit")
    p.add_argument("--check", action="store_true", help="check the token and server, then exit")
    p.add_argument("--version", action="version", version=__version__)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(message)s")
    if not 0.1 <= args.poll <= args.interval or not 1 <= args.interval <= 3600:
        raise SystemExit("gpuloans-agent: need 0.1 <= --poll <= --interval <= 3600 seconds")
    holders = holders_for(args)
    if args.once:
        try:
            readings = collector_for(args).poll()
        except CollectorError as error:
            raise SystemExit(f"gpuloans-agent: {error}") from None
        if holders is not None:
            readings = holders.apply(readings)
        aggregator = Aggregator(args.interval)
        now = datetime.now(UTC)
        aggregator.add(readings, now)
        samples = [{**s, "ts": now.replace(microsecond=0).isoformat()}
                   for s in aggregator.completed(datetime.max.replace(tzinfo=UTC))]
        print(json.dumps({"node": args.node, "agent_version": __version__, "samples": samples},
                         indent=2))
        return 0
    if not args.server or not args.token_file:
        raise SystemExit("gpuloans-agent: --server and --token-file are required")
    try:
        client = Client(args.server, read_token(args.token_file), args.node)
    except ValueError as error:
        raise SystemExit(f"gpuloans-agent: {error}") from None
    if args.check:
        outcome = client.send([], 0)
        print(("ok: " if outcome.done else "failed: ") + outcome.message)
        return 0 if outcome.done else 1
    try:
        collector = collector_for(args)
    except CollectorError as error:
        raise SystemExit(f"gpuloans-agent: {error}") from None
    try:
        spool = Spool(args.spool_dir, int(args.spool_max_mb * 1024 * 1024),
                      max_age_s=args.spool_max_age_days * 86400)
    except OSError as error:
        raise SystemExit(f"gpuloans-agent: cannot use the spool directory: {error}") from None
    agent = Agent(collector, spool, client, poll_s=args.poll, interval_s=args.interval,
                  holders=holders)
    log.info("gpuloans-agent %s: node %s, server %s, collector %s, allocation from %s, a sample "
             "every %d s (polled every %g s), spool %s (%d batches waiting)", __version__,
             args.node, args.server, args.collector, args.allocation_source, args.interval,
             args.poll, args.spool_dir, len(spool.pending()))
    # systemd and Kubernetes stop with SIGTERM: finish the poll, let the sender end its
    # batch, and say so, as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: agent.stopping.set())
    try:
        agent.run()
    except KeyboardInterrupt:
        agent.stopping.set()
    log.info("gpuloans-agent stopped; %d batches wait in the spool for the next start",
             len(spool.pending()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
