"""A refused advice form keeps its file for the next try in the uploads storage, bounded: at
most ADVICE_KEPT_BYTES a person, an hour at most, never in the cache (where four refused
8.3 MB uploads grew Redis by 40 MiB for an hour); and a file that wrong is not read to its end."""

from datetime import timedelta

import pytest
import time_machine
from django.core.cache import cache
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from loans.services.advice import kept_files
from loans.services.advice.history import MAX_PROBLEMS, HistoryError, read_history
from loans.tasks import purge_kept_files
from tests.conftest import make_user


def refused_upload(client, name: str = "bad.csv", lines: int = 1000):
    text = "ts,gpus\n" + "\n".join(f"not-a-time,{k}" for k in range(lines))
    upload = SimpleUploadedFile(name, text.encode(), "text/csv")
    return client.post("/en/advise/", {"history": upload, "time_zone": "UTC",
                                       "term_months": 12}), text


def test_a_refused_upload_is_kept_in_the_uploads_storage_not_the_cache(client, operator):
    client.force_login(operator)
    answer, text = refused_upload(client)
    assert answer.status_code == 400
    token = answer.context["kept"]["token"]
    assert cache.get(f"advice-file:{operator.pk}:{token}") is None  # where it was kept
    assert kept_files.kept(operator.pk, token) == ("bad.csv", text)
    assert storages["uploads"].exists(f"advice/{operator.pk}/{token}")


def test_one_person_keeps_at_most_the_quota_the_oldest_going_first(client, operator, settings):
    settings.ADVICE_KEPT_BYTES = 60_000
    client.force_login(operator)
    tokens = [refused_upload(client, f"{k}.csv", lines=1500)[0].context["kept"]["token"]
              for k in range(4)]  # 25 KB each
    assert [kept_files.kept(operator.pk, t) is not None for t in tokens] == [
        False, False, True, True]
    used = sum(size for _at, size, _path in kept_files._files(operator.pk))
    assert 0 < used <= settings.ADVICE_KEPT_BYTES


def test_a_kept_file_is_refused_after_an_hour_and_the_purge_deletes_it(client, operator):
    client.force_login(operator)
    token = refused_upload(client)[0].context["kept"]["token"]
    later = timezone.now() + timedelta(seconds=kept_files.KEPT_SECONDS + 60)
    with time_machine.travel(later, tick=False):
        assert purge_kept_files() == "1 kept files deleted"
    assert not storages["uploads"].exists(f"advice/{operator.pk}/{token}")
    token = refused_upload(client)[0].context["kept"]["token"]
    assert kept_files.kept(operator.pk, token, now=later) is None


def test_a_token_is_only_its_uploaders_and_never_a_path(client, operator):
    client.force_login(operator)
    token = refused_upload(client)[0].context["kept"]["token"]
    other = make_user("other-operator", staff=True)
    assert kept_files.kept(other.pk, token) is None
    assert kept_files.kept(operator.pk, "../../etc/passwd") is None
    assert kept_files.kept(operator.pk, f"../{operator.pk}/{token}") is None


@pytest.mark.parametrize("header, bad", [
    ("ts,gpus", "not-a-time,1"),
    ("JobID|Account|User|Start|End|AllocTRES", "1|a|u|soon|later|gres/gpu=1"),
])
def test_a_file_that_wrong_is_not_read_to_its_end(header, bad):
    """An 8 MiB file of bad rows was read whole (2.4 s of a web worker); reading now stops at
    the MAX_PROBLEMS-th problem and says where."""
    text = header + "\n" + "\n".join([bad] * 300_000)
    with pytest.raises(HistoryError) as refused:
        read_history(text)
    problems = refused.value.problems
    assert len(problems) == MAX_PROBLEMS + 1
    assert problems[-1] == (f"reading stopped at line {MAX_PROBLEMS + 2} after {MAX_PROBLEMS} "
                            "problems: correct them and send the file again")
