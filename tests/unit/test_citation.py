"""CITATION.cff parses, cites the paper as preferred citation, credits Cui et al. 2025 and Open-RS, and
states no version of its own: the version is pyproject's alone (cwgrpo.__version__ reads it)."""

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
CFF = REPO / "CITATION.cff"


def test_citation_cff_cites_the_paper_and_its_predecessors():
    cff = yaml.safe_load(CFF.read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0"
    assert "version" not in cff  # a second copy would go stale: the citation cannot read pyproject
    preferred = cff["preferred-citation"]
    assert preferred["title"].startswith("Taming Extreme Tokens")
    assert [a["family-names"] for a in preferred["authors"]] == ["Wang", "Liu", "Zhou", "Chen"]
    assert preferred["year"] == 2026
    titles = " ".join(ref["title"] for ref in cff["references"])
    assert "Entropy Mechanism" in titles  # Cui et al. 2025
    assert "Small LLMs" in titles  # Open-RS
