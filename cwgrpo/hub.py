"""``cwgrpo fetch-model``: download a Hugging Face model at a pinned revision into a local folder.

    cwgrpo fetch-model --model-id 1.5b --out-dir results/paper/models/1.5b/base \\
        --marker results/paper/models/1.5b/base.json

``--model-id`` is a Hub id or a key of ``MODELS`` (whose pinned revision is then the default). The
marker JSON ``{path, model_id, revision, commit, provenance}`` is written only after the download is
complete, so a marker always describes a whole model folder. Needs network access; no test calls it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
from dataclasses import field
from pathlib import Path

from cwgrpo.configs import ConfigError, add_config_arguments, config_from_args, describe_options

logger = logging.getLogger(__name__)

# The paper's models: key -> (Hub id, revision). No network here to look up commit shas, so the
# revisions are "main"; the marker records the commit that "main" resolved to at download time.
MODELS: dict[str, tuple[str, str]] = {
    "1.5b": ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", "main"),
    "7b": ("Qwen/Qwen2.5-Math-7B-Instruct", "main"),
}


@dataclasses.dataclass
class FetchConfig:
    """Options of ``cwgrpo fetch-model``."""

    ignore_patterns: list[str] = field(
        default_factory=lambda: ["original/*", "*.pth", "*.gguf"],
        metadata={"help": "files of the repository not to download (glob patterns)"},
    )
    max_workers: int = field(default=8, metadata={"help": "parallel downloads"})


def resolve_model(model_id: str, revision: str | None) -> tuple[str, str]:
    """(Hub id, revision) from a Hub id or a ``MODELS`` key; a bare Hub id needs a revision."""
    if model_id in MODELS:
        hub_id, pinned = MODELS[model_id]
        return hub_id, revision or pinned
    if "/" not in model_id:
        raise ConfigError(
            f"--model-id {model_id!r} is neither a Hub id (owner/name) nor one of {sorted(MODELS)}"
        )
    if not revision:
        raise ConfigError(f"--revision is required for {model_id} (pin a commit sha or tag)")
    return model_id, revision


NETWORK_MODULES = ("httpx", "httpcore", "requests", "urllib3", "huggingface_hub", "socket", "ssl")


def _is_network_error(err: BaseException) -> bool:
    """An exception raised by the HTTP stack (whatever library, e.g. ``httpx.ConnectError``)."""
    return any(type(e).__module__.split(".")[0].rstrip("0123456789") in NETWORK_MODULES for e in _chain(err))


def _chain(err: BaseException):
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


@contextlib.contextmanager
def hub_errors(model_id: str, revision: str):
    """Turn a network failure into one ``OSError`` line naming the model (not an HTTP-library traceback)."""
    try:
        yield
    except Exception as err:
        if not _is_network_error(err):
            raise
        raise OSError(
            f"cannot download {model_id}@{revision} from the Hugging Face Hub ({type(err).__name__}: {err}); "
            "check the network (or the proxy), or fetch the model where the Hub is reachable"
        ) from err


def fetch_model(model_id: str, revision: str, out_dir: Path, marker: Path, cfg: FetchConfig) -> dict:
    """Download, check the folder holds a model, then write the marker; returns the marker."""
    from huggingface_hub import HfApi, snapshot_download

    from cwgrpo.io import write_json
    from cwgrpo.provenance import provenance

    with hub_errors(model_id, revision):
        commit = HfApi().model_info(model_id, revision=revision).sha  # pin what "main" means today
        logger.info("downloading %s@%s (commit %s) to %s", model_id, revision, commit, out_dir)
        snapshot_download(
            repo_id=model_id,
            revision=commit,
            local_dir=str(out_dir),
            ignore_patterns=cfg.ignore_patterns,
            max_workers=cfg.max_workers,
        )
    if not (out_dir / "config.json").is_file():
        raise ValueError(f"{model_id}@{commit}: downloaded folder {out_dir} has no config.json")
    info = {
        "path": str(out_dir),
        "model_id": model_id,
        "revision": revision,
        "commit": commit,
        "provenance": provenance(config=dataclasses.asdict(cfg)),
    }
    write_json(marker, info)
    return info


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model-id", required=True, help=f"Hub id (owner/name) or one of {sorted(MODELS)}")
    parser.add_argument(
        "--revision", default=None, help="commit sha, tag or branch (default: the pinned one)"
    )
    parser.add_argument("--out-dir", required=True, type=Path, help="folder to download into")
    parser.add_argument("--marker", required=True, type=Path, help="marker JSON, written after the download")
    add_config_arguments(parser)
    parser.epilog = describe_options(FetchConfig)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(FetchConfig, args)
    model_id, revision = resolve_model(args.model_id, args.revision)
    fetch_model(model_id, revision, args.out_dir, args.marker, cfg)
    return 0
