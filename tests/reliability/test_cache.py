"""Redis as the throttles' cache: shared by every worker while it is up; when it is away,
requests go on unthrottled instead of failing."""

import json
from datetime import timedelta

import pytest
import redis
from django.core.cache import cache
from django.test import Client, override_settings
from django.utils import timezone

from metering.models import Node
from tests.conftest import PASSWORD
from tests.helpers import redis_url


def redis_cache(url: str) -> dict:
    return {"default": {"BACKEND": "config.cache.ForgivingRedisCache", "LOCATION": url,
                        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1}}}


LIVE = redis_url(8)
AWAY = "redis://127.0.0.1:1/0"  # nothing listens on port 1


def post_batch(client: Client, node: Node, token: str, minute: int):
    ts = (timezone.now() - timedelta(minutes=minute)).isoformat()
    body = {"node": node.name, "samples": [
        {"gpu_uuid": "GPU-1", "ts": ts, "interval_s": 60, "allocated": True}]}
    return client.post("/api/v1/samples", json.dumps(body), content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.fixture
def node(db):
    node = Node.objects.create(name="gpu-node-01")
    return node, node.issue_token()


def test_with_redis_up_the_rate_limit_holds(node, settings):
    redis.Redis.from_url(LIVE).flushdb()
    settings.INGEST_REQUESTS_PER_MINUTE = 2
    with override_settings(CACHES=redis_cache(LIVE)):
        answers = [post_batch(Client(), *node, minute=k).status_code for k in range(1, 4)]
        cache.clear()
    assert answers[:2] == [202, 202] and answers[2] == 429


def test_with_redis_away_nothing_fails(node, lead, settings, caplog):
    settings.INGEST_REQUESTS_PER_MINUTE = 2
    with override_settings(CACHES=redis_cache(AWAY)):
        answers = [post_batch(Client(), *node, minute=k).status_code for k in range(1, 4)]
        login = Client().post("/en/accounts/login/", {"username": "lead",
                                                      "password": PASSWORD})
        api = Client()
        api.force_login(lead)
        usage = api.get("/api/v1/tenants/vision/usage")
    assert answers == [202, 202, 202]  # unthrottled, not refused
    assert login.status_code == 302
    assert usage.status_code == 200
    assert "cache unavailable" in caplog.text
