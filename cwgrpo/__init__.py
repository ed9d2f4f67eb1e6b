"""cwgrpo: replication package for CW-GRPO (covariance-aware GRPO with Gaussian-kernel advantage reweighting).

The maths lives in :mod:`cwgrpo.weighting` (pure torch); the TRL adapter in :mod:`cwgrpo.trainer`.
"""

from importlib.metadata import PackageNotFoundError, version

try:  # one version, pyproject.toml's, read from the installed package's metadata
    __version__ = version("cwgrpo")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__", "cw_weights"]


def __getattr__(name: str):
    # Lazy so that `import cwgrpo` (e.g. from the CLI's --help) does not pay for importing torch.
    if name == "cw_weights":
        from cwgrpo.weighting import cw_weights

        return cw_weights
    raise AttributeError(f"module 'cwgrpo' has no attribute {name!r}")
