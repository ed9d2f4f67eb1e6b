"""Docs and configs cite only files that exist: a path of this repository named in the README, docs/,
a preset's comments, an env file, a profile or a report caption must be in the tree (a renamed or removed
file leaves a stale pointer, which this finds); every relative Markdown link resolves, heading included."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TEXTS = [
    "README.md",
    "CITATION.cff",
    ".snakemake-workflow-catalog.yml",
    "Makefile",
    ".ci/run",
    "docs/**/*.md",
    "config/**/*.yaml",
    "config/README.md",
    "envs/*",
    "profiles/**/*.yaml",
    "figures/README.md",
    "results/README.md",
    "workflow/report/*.rst",
    "workflow/schemas/*.yaml",
    "benchmarks/**/*.md",
]
# A path inside the repository: one of its top folders, then path characters.
REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:cwgrpo|tests|docs|benchmarks|workflow|config|envs|profiles|\.ci)/[\w./{}*<>-]*[\w*}>/])"
)
# Files announced before they exist (none now; a documented command's `--out FILE` is skipped anyway).
NOT_YET: dict[str, str] = {}
# A registration, or a study's recorded report, is never edited after its commit: its paths name the tree
# it was registered (or made) in.
REGISTRATIONS = {
    "docs/study/results-smollm2/claims.md": "d4613f3",
    "docs/study/preregistration.md": "5e86e3b",
    "docs/study/preregistration-regime.md": "bb08cf8",
    "docs/study/pilot-smollm2.md": "3ccfac1",
    "docs/study/preregistration-smollm2.md": "6e24205",
}  # path -> the commit that registered it


def cited_paths() -> list[tuple[str, int, str]]:
    """(file, line, path) for every repository path the texts name, less patterns and command outputs."""
    found = []
    for pattern in TEXTS:
        for file in sorted(REPO.glob(pattern)):
            if not file.is_file() or str(file.relative_to(REPO)) in REGISTRATIONS:
                continue
            text = file.read_text(encoding="utf-8", errors="replace")
            for match in REPO_PATH.finditer(text):
                path = match.group(1).rstrip("/")
                if any(c in path for c in "{*<") or text[: match.start()].endswith("--out "):
                    continue
                line = text.count("\n", 0, match.start()) + 1
                found.append((str(file.relative_to(REPO)), line, path))
    return found


def test_every_cited_path_exists():
    cited = cited_paths()
    assert len(cited) > 100  # the scan finds the docs' many pointers (a broken pattern would find none)
    missing = [f"{file}:{line}: {path}" for file, line, path in cited if not (REPO / path).exists()]
    assert [m for m in missing if m.rsplit(": ", 1)[1] not in NOT_YET] == []
    for path in NOT_YET:  # an entry for a file that now exists, or that no text names any more, goes
        assert path in {p for _, _, p in cited} and not (REPO / path).exists(), path


def _anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", markdown, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_markdown_link_resolves():
    """A relative link of the README or a doc (`[text](docs/usage.md#tests)`) names a file that exists and,
    for a page, one of its headings: moving a section between pages must move its links too."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("**/*.md"))]
    pages += [REPO / d / "README.md" for d in ("config", "envs", "figures", "results")]
    links, broken = 0, []
    for page in pages:
        commit = REGISTRATIONS.get(str(page.relative_to(REPO)))  # a registration's links: its own tree
        for link in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if link.startswith(("http://", "https://", "mailto:")):
                continue
            links += 1
            path, _, anchor = link.partition("#")
            target = (page.parent / path).resolve() if path else page
            text = _text_at(commit, target) if commit else _text_here(target)
            if text is None:
                broken.append(
                    f"{page.relative_to(REPO)}: {link} (no such file{f' at {commit}' if commit else ''})"
                )
            elif anchor and target.suffix == ".md" and anchor not in _anchors(text):
                broken.append(f"{page.relative_to(REPO)}: {link} (no such heading)")
    assert links > 20 and broken == []


def _text_here(target: Path) -> str | None:
    """A page's text ('' for any other file or a folder), None where nothing exists."""
    if not target.exists():
        return None
    return target.read_text("utf-8") if target.suffix == ".md" else ""


def _text_at(commit: str, target: Path) -> str | None:
    """The same at ``commit`` (a registration's tree); without git history here, the working tree's."""
    if not (REPO / ".git").exists():
        return _text_here(target)
    shown = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{commit}:{target.relative_to(REPO)}"], capture_output=True
    )
    if shown.returncode != 0:
        return None
    return shown.stdout.decode("utf-8") if target.suffix == ".md" else ""


@pytest.mark.parametrize("path", sorted(REGISTRATIONS))
def test_a_registration_is_the_text_its_commit_registered(path):
    shown = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{REGISTRATIONS[path]}:{path}"], capture_output=True, text=True
    )
    if shown.returncode != 0:
        pytest.skip(f"no git history here to read {REGISTRATIONS[path]} from")
    assert (REPO / path).read_text(encoding="utf-8") == shown.stdout
