"""Training completions in the sample browser: what TRL's ``log_completions`` saved.

Training completions in the sample browser, beside the evaluation samples: what TRL's ``log_completions``
saved.

With ``log_completions: true`` (a preset's ``train:`` section, or ``cwgrpo train --set
log_completions=true``) TRL 1.16 writes the latest generation batch at every logging step to
``<output_dir>/completions/completions_<step>.parquet`` (step, prompt, completion, each reward, advantage);
``cwgrpo train``'s ``output_dir`` is the run folder. The page shows, per run, the first and the last logged
step, ``per_cell`` rows of each: the first rows, so whole groups of one prompt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from cwgrpo.report.samples_load import Issue, SamplesConfig
from cwgrpo.report.samples_page import clip

FOLDER = "completions"  # TRL's, under output_dir
_STEP = re.compile(r"completions_(\d+)\.parquet")
_NOT_REWARDS = ("step", "prompt", "completion", "advantage", "image", "images")
HINT = (
    "No training completions saved: with log_completions: true in the preset's train: section, TRL writes "
    "each logged step's completions to the run folder's completions/ and they appear here."
)


@dataclass(frozen=True)
class TrainStep:
    """The rows shown of one logged step of one run."""

    tags: dict[str, str]  # size, method, seed (the run's run.json)
    step: int
    path: Path
    total: int  # rows in the file
    rows: list[dict[str, Any]]


def message_text(value: Any) -> str:
    """A prompt or completion as text: a conversation's messages as ``role: content`` lines."""
    if isinstance(value, list):
        return "\n".join(
            f"{m.get('role', '?')}: {m.get('content', '')}" if isinstance(m, dict) else str(m) for m in value
        )
    return "" if value is None else str(value)


def logged_steps(run_dir: Path) -> dict[int, Path]:
    """Step -> its completions file, for every file TRL wrote under ``run_dir``."""
    found = {}
    for path in (run_dir / FOLDER).glob("completions_*.parquet"):
        if match := _STEP.fullmatch(path.name):
            found[int(match.group(1))] = path
    return dict(sorted(found.items()))


def read_step(path: Path, tags: dict[str, str], step: int, per_step: int) -> TrainStep:
    import pyarrow.parquet as pq  # datasets' dependency, so TRL's

    records = pq.read_table(path).to_pylist()
    rows = [
        {
            "prompt": message_text(r.get("prompt")),
            "completion": message_text(r.get("completion")),
            "advantage": r.get("advantage"),
            "rewards": {
                k: v
                for k, v in r.items()
                if k not in _NOT_REWARDS and isinstance(v, int | float) and v is not None
            },
        }
        for r in records[:per_step]
    ]
    return TrainStep(tags, step, path, len(records), rows)


def load_train_steps(run_dirs: list[Path], cfg: SamplesConfig) -> tuple[list[TrainStep], list[Issue]]:
    """The first and last logged step of each run that saved completions; a file that cannot be read is
    an issue, not a failed page."""
    from cwgrpo.io import ResultFileError
    from cwgrpo.report.load import run_info

    shown, issues = [], []
    for run_dir in run_dirs:
        steps = logged_steps(Path(run_dir))
        if not steps:
            continue
        try:
            info = run_info(run_dir)
        except ResultFileError as err:
            issues.append(Issue(str(Path(run_dir) / "run.json"), str(err)))
            continue
        tags = {k: str(info[k]) for k in ("size", "method", "seed")}
        for step in dict.fromkeys([min(steps), max(steps)]):
            try:
                shown.append(read_step(steps[step], tags, step, cfg.per_cell))
            except Exception as err:  # pyarrow's errors have no common base: a damaged file of any kind
                issues.append(Issue(str(steps[step]), f"not a readable completions file: {err}"))
    return shown, issues


def train_html(steps: list[TrainStep], cfg: SamplesConfig) -> str:
    """The page's training section (id ``training``): one block per run and step."""
    blocks = []
    for s in steps:
        t = s.tags
        title = (
            f"{cfg.method_name(t['method'])} · {cfg.size_name(t['size'])} · seed {t['seed']} · step {s.step}"
        )
        items = []
        for i, row in enumerate(s.rows):
            scores = [f"{name} {value:.3g}" for name, value in row["rewards"].items()]
            if row["advantage"] is not None:
                scores.append(f"advantage {row['advantage']:+.3g}")
            items.append(
                f'<article class="train"><header><span class="id">row {i + 1}</span> '
                f'<span class="flag">{escape(", ".join(scores))}</span></header>'
                f'<dl><dt>prompt</dt><dd class="problem">{escape(clip(row["prompt"], cfg.max_chars))}</dd></dl>'
                f'<pre class="completion">{escape(clip(row["completion"], cfg.max_chars))}</pre></article>'
            )
        blocks.append(
            f"<section><h3>{escape(title)}</h3><p class='counts'>{len(s.rows)} of {s.total} completions of "
            f"this step (<code>{escape(str(s.path))}</code>)</p>{''.join(items)}</section>"
        )
    body = "".join(blocks) or f'<p class="none">{escape(HINT)}</p>'
    return f'<section id="training"><h2>Training completions (TRL log_completions)</h2>{body}</section>'
