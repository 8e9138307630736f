"""The Redis cache, forgiving: the cache holds only throttle counters, so when Redis is away a
request goes on unthrottled (and a warning is logged) instead of failing with a 500."""

import logging
import time

from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)
AWAY = (RedisConnectionError, RedisTimeoutError, OSError)
WARN_EVERY = 60  # seconds between warnings while Redis stays away
_warned = [0.0]


def _away(error: Exception) -> None:
    if time.monotonic() - _warned[0] > WARN_EVERY:
        log.warning("cache unavailable, throttles are off until it returns: %s", error)
        _warned[0] = time.monotonic()


class ForgivingRedisCache(RedisCache):
    def get(self, key, default=None, version=None):
        try:
            return super().get(key, default, version)
        except AWAY as error:
            _away(error)
            return default

    def get_many(self, keys, version=None):
        try:
            return super().get_many(keys, version)
        except AWAY as error:
            _away(error)
            return {}

    def add(self, key, value, timeout=None, version=None):
        try:
            return super().add(key, value, timeout, version)
        except AWAY as error:
            _away(error)
            return False

    def set(self, key, value, timeout=None, version=None):
        try:
            super().set(key, value, timeout, version)
        except AWAY as error:
            _away(error)

    def incr(self, key, delta=1, version=None):
        try:
            return super().incr(key, delta, version)
        except AWAY as error:
            _away(error)
            return delta  # as if counting afresh: nobody is throttled while Redis is away

    def delete(self, key, version=None):
        try:
            return super().delete(key, version)
        except AWAY as error:
            _away(error)
            return False
