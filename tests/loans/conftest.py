"""The metered story (tests/story.py) for the dashboard tests."""

from tests.story import frozen, metered  # noqa: F401
