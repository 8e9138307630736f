from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"


@pytest.fixture
def fixture_text():
    def read(*parts: str) -> str:
        path = FIXTURES.joinpath(*parts)
        assert path.is_file(), f"{path} is missing: the fixtures live in ../shared/fixtures"
        return path.read_text()

    return read
