"""N simulated GPUs with seeded, realistic patterns, for demos, tests and load."""

import random
import uuid as uuids
from datetime import datetime

from agent.readings import Process, Reading

NAMESPACE = uuids.UUID("5d4d2b0e-8f6e-4f7a-9a43-0e3b2c1d7f10")


class FakeCollector:
    """Each GPU runs jobs that start and stop at random (seeded per GPU and hour), busy between
    40 and 100% while a job holds it, idle otherwise."""

    def __init__(self, count: int, node: str = "fake-node", seed: int = 0,
                 model: str = "NVIDIA H100 80GB HBM3", memory_mib: int = 81559):
        self.count, self.node, self.seed = count, node, seed
        self.model, self.memory_mib = model, memory_mib
        self.uuids = [f"GPU-{uuids.uuid5(NAMESPACE, f'{node}/{i}')}" for i in range(count)]

    def poll(self, now: datetime | None = None) -> list[Reading]:
        now = now or datetime.now().astimezone()
        hour = now.replace(minute=0, second=0, microsecond=0).isoformat()
        readings = []
        for index, gpu in enumerate(self.uuids):
            plan = random.Random(f"{self.seed}:{gpu}:{hour}")  # noqa: S311 - not a secret
            busy = plan.random() < 0.65
            jitter = random.Random(f"{self.seed}:{gpu}:{now.isoformat()}")  # noqa: S311
            util = min(100.0, max(0.0, plan.uniform(40, 100) + jitter.gauss(0, 5))) if busy else 0.0
            owner = {"namespace": plan.choice(["team-a", "team-b", "research"]),
                     "pod": f"train-{plan.randrange(100)}"} if busy else None
            readings.append(Reading(
                uuid=gpu, index=index, model=self.model, util_pct=round(util, 1),
                mem_used_mib=int(self.memory_mib * plan.uniform(0.3, 0.9)) if busy else 0,
                mem_total_mib=self.memory_mib, power_w=round(70 + util * 6.2, 1),
                temp_c=int(35 + util / 3),
                processes=(Process(pid=10_000 + index, owner=owner),) if busy else (),
            ))
        return readings
