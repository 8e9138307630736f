import json
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.management.base import CommandError

from core.audit import AuditedCommand
from loans.demo import fleet_state, node_tokens, pools
from metering.services import MAX_INTERVAL_S, MIN_INTERVAL_S
from metering.usage import floor_hour


class Command(AuditedCommand):
    help = (
        "Simulated agents for the demo: post the demo fleet's usage to a running gpuloans "
        "through agent protocol v1, one sample per GPU every interval. Issues new tokens for "
        "the demo nodes (run seed_demo first)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--server", default="http://127.0.0.1:8000")
        parser.add_argument("--interval", type=int, default=60, help="seconds (default 60)")
        parser.add_argument("--rounds", type=int, default=0, help="stop after N (0: never)")

    def handle(self, *args, server: str, interval: int, rounds: int, **options):
        if urlsplit(server).scheme not in ("http", "https"):
            raise CommandError(f"--server {server!r} must be an http:// or https:// address.")
        if not MIN_INTERVAL_S <= interval <= MAX_INTERVAL_S:
            raise CommandError(f"--interval must be between {MIN_INTERVAL_S} and "
                               f"{MAX_INTERVAL_S} seconds.")
        demo = pools()
        if not all(demo.values()):
            raise CommandError("No demo fleet here; run `python manage.py seed_demo` first.")
        tokens = node_tokens(demo)
        zone = ZoneInfo(settings.TIME_ZONE)
        done = 0
        while not rounds or done < rounds:
            now = datetime.now(UTC)
            ts = now - timedelta(seconds=now.timestamp() % interval)
            self._post_round(server.rstrip("/"), tokens, demo, zone, ts, interval)
            done += 1
            if not rounds or done < rounds:
                time.sleep(max(0.0, (ts + timedelta(seconds=interval) - datetime.now(UTC))
                               .total_seconds()))

    def _post_round(self, server, tokens, demo, zone, ts, interval) -> None:
        by_node: dict[str, list] = {}
        for gpu, allocated, util, owner in fleet_state(floor_hour(ts), zone, demo):
            by_node.setdefault(gpu.node.name, []).append({
                "gpu_uuid": gpu.uuid, "gpu_index": gpu.index, "model": gpu.model,
                "mem_total_mib": gpu.memory_total_mib, "ts": ts.isoformat(),
                "interval_s": interval, "allocated": allocated, "util_pct": util,
                "owner": owner,
            })
        accepted = refused = 0
        for name, samples in by_node.items():
            body = json.dumps({"node": name, "agent_version": "demo", "samples": samples})
            request = urllib.request.Request(  # noqa: S310 - the scheme is checked in handle()
                f"{server}/api/v1/samples", data=body.encode(), method="POST",
                headers={"Content-Type": "application/json",
                         "Authorization": f"Bearer {tokens[name]}"})
            try:
                with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                    answer = json.loads(response.read())
                accepted += answer["accepted"]
                refused += len(answer["rejected"])
            except (urllib.error.URLError, OSError) as error:
                self.stderr.write(f"{ts:%H:%M:%S} {name}: {error}; will send the next round")
        self.stdout.write(f"{ts:%H:%M:%S} posted {sum(map(len, by_node.values()))} samples: "
                          f"{accepted} accepted, {refused} rejected", ending="\n")
        self.stdout.flush()
