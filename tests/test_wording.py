"""core.wording: what a job wrote is said in the reader's language, and nothing is lost where
a row holds no template (written before, or typed by a person)."""

from decimal import Decimal

from django.utils import translation
from django.utils.translation import gettext_noop

from core.wording import said, worded


def test_a_stored_sentence_is_said_in_the_language_of_whoever_reads_it():
    wording = worded(gettext_noop("priority set to %(p)s"), {"p": 3})
    assert wording.english == "priority set to 3"
    with translation.override("zh-hans"):
        assert said(wording.stored(), wording.english) == "优先级设为 3"
    with translation.override("en"):
        assert said(wording.stored(), wording.english) == "priority set to 3"


def test_decimals_become_numbers_the_templates_format_and_json_can_hold():
    wording = worded("%(used).0f%% of %(committed)s", {"used": Decimal("99.6"),
                                                       "committed": "1,000"})
    assert wording.facts == {"used": 99.6, "committed": "1,000"}
    assert wording.english == "100% of 1,000"


def test_rows_without_a_template_or_with_facts_that_no_longer_fit_fall_back_to_their_text():
    assert said({}, "granted by hand") == "granted by hand"
    assert said(None, "as typed") == "as typed"
    assert said({"template": "%(gone)s left", "facts": {"other": 1}}, "3 left") == "3 left"


def test_advice_written_before_its_sentence_changed_still_reads_in_chinese():
    """The base-quota and plan sentences changed (issue 22); decided rows stay on the page for
    30 days with the old template."""
    from loans.services.advice.standalone import RETIRED

    facts = {"new": "4", "old": "8", "days": 30, "p95": "3.0", "plan": "Fair",
             "cost": "1.00", "currency": "CNY", "own": "2.00", "fee": "3.00", "term": 12}
    with translation.override("zh-hans"):
        for template in RETIRED:
            text = said(worded(template, facts).stored())
            assert text != template % facts and "GPUs" not in text and "would" not in text
