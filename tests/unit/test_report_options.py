"""cwgrpo_workflow.report.options.number: the one way the report writes a number (each page's spelling kept)."""

import math

from cwgrpo_workflow.report.options import number


def test_missing_and_non_finite_values_are_one_dash_or_the_pages_own_word():
    assert [number(x) for x in (None, math.nan, math.inf)] == ["—", "—", "—"]
    assert number(math.nan, missing="n/a") == "n/a"


def test_signs_percent_and_the_typographic_minus():
    assert number(-0.0512, 1, True, percent=True) == "−5.1"
    assert number(0.0512, 1, True, percent=True) == "+5.1"
    assert number(-1.25, 2, minus="-") == "-1.25"


def test_small_values_keep_two_significant_digits():
    assert number(0.0012, 2, True, small=True) == "+0.0012"
    assert number(0.0012, 2, True) == "+0.00"
    assert number(0.0, 2, small=True) == "0.00"
