"""How the report writes a number in text: one formatter for every table, claim and study page.

A missing or non-finite value is written ``missing`` ("—" unless a page says otherwise), and a minus sign
is the typographic ``−`` unless a page keeps ASCII ``-``, so that each page's text is what it always was.
"""

from __future__ import annotations

import math
from typing import Any

MISSING = "—"
MINUS = "−"


def number(
    x: Any,
    decimals: int = 1,
    sign: bool = False,
    *,
    percent: bool = False,
    small: bool = False,
    missing: str = MISSING,
    minus: str = MINUS,
) -> str:
    """``x`` to ``decimals`` decimals (``+`` shown when ``sign``); ``percent`` writes ``100 * x``; ``small``
    writes two significant digits where ``decimals`` decimals would show ±0.00."""
    if x is None or not math.isfinite(x):
        return missing
    if percent:
        x = 100 * x
    if small and x != 0 and abs(x) < 0.5 * 10**-decimals:
        decimals = 1 - math.floor(math.log10(abs(x)))
    text = f"{x:+.{decimals}f}" if sign else f"{x:.{decimals}f}"
    return text.replace("-", minus)
