"""A stand-in for `conda` (>= 24.7.1) that lets Snakemake run its conda code paths where no conda exists.

It answers the three queries Snakemake makes (`info --json`, `--version`, `config --get channel_priority
--json`), accepts `clean` and, for `env create --file F --prefix P`, does what conda's pip installer does with the env
file's `pip:` section (conda/env/installers/pip.py: the lines go into a requirements file in F's folder,
and pip runs from there, inheriting the environment), but instead of installing, it asks pip's own parser
where each editable requirement points and which extras it asks for. The answer goes to P/standin-report.json; P is created so that
Snakemake sees an environment. Conda packages are not installed: nothing here can fetch them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def editable_targets(env_file: Path) -> list[tuple[str, list[str]]]:
    """(absolute path, extras) of each `-e` line of an env file's pip section, as pip resolves them from
    conda's folder."""
    import yaml
    from pip._internal.network.session import PipSession
    from pip._internal.req.constructors import parse_editable
    from pip._internal.req.req_file import parse_requirements

    env = yaml.safe_load(env_file.read_text(encoding="utf-8"))
    pip_lines = [line for dep in env["dependencies"] if isinstance(dep, dict) for line in dep.get("pip", [])]
    workdir = env_file.resolve().parent  # conda: pip_workdir = dirname(abspath(file))
    requirements = workdir / "condaenv.standin.requirements.txt"
    requirements.write_text("\n".join(pip_lines), encoding="utf-8")
    here = Path.cwd()
    os.chdir(workdir)  # conda runs pip with cwd=pip_workdir
    try:
        targets = []
        for parsed in parse_requirements(str(requirements), session=PipSession()):
            if parsed.is_editable:
                _, url, extras = parse_editable(parsed.requirement)
                targets.append((url.removeprefix("file://"), sorted(extras)))
        return targets
    finally:
        os.chdir(here)
        requirements.unlink()


def main(argv: list[str]) -> int:
    prefix = os.environ.get("STANDIN_CONDA_PREFIX", "/nonexistent")
    command = " ".join(argv)
    if command == "info --json":
        print(json.dumps({"conda_prefix": prefix, "root_prefix": prefix, "platform": "linux-64"}))
    elif command == "--version":
        print("conda 24.11.0")
    elif command == "config --get channel_priority --json":
        print(json.dumps({"get": {"channel_priority": "strict"}, "success": True}))
    elif argv[:1] == ["clean"]:  # Snakemake's --conda-cleanup-pkgs (default: tarballs); nothing to clean
        pass
    elif argv[:2] == ["env", "create"]:
        env_file = Path(argv[argv.index("--file") + 1])
        target = Path(argv[argv.index("--prefix") + 1])
        target.mkdir(parents=True)
        editable = editable_targets(env_file)
        report = {
            "env_file": str(env_file),
            "editable": [path for path, _ in editable],
            "extras": [extras for _, extras in editable],
        }
        (target / "standin-report.json").write_text(json.dumps(report), encoding="utf-8")
    else:
        print(f"stand-in conda: {command}: not supported", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
