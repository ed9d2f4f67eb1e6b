"""The TRL adapter: ``CWGRPOTrainer`` and ``CWGRPOConfig``, TRL's GRPO with per-token advantage weights.

``from cwgrpo.trainer import CWGRPOConfig, CWGRPOTrainer`` imports TRL; importing a piece (``options``,
``trl_loss``, ``learning_signal``, ``probe_kl``) does not, so the workflow's parse checks the same rules.
"""

__all__ = ["CWGRPOConfig", "CWGRPOTrainer"]


def __getattr__(name: str):
    if name in __all__:
        from cwgrpo.trainer import grpo

        return getattr(grpo, name)
    raise AttributeError(f"module 'cwgrpo.trainer' has no attribute {name!r}")
