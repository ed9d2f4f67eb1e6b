"""The TRL adapter: ``CWGRPOTrainer`` and ``CWGRPOConfig``, TRL's GRPO with per-token advantage weights.

Both in ``grpo``, with the fused LM head's temperature, the check of one group per loss micro-batch and the
released run's entropy and KL statistics. Its pieces: the ``cw_*`` options and their one validator
(``options``, TRL-free, so the workflow's parse checks the same rules), TRL's loss reductions (``trl_loss``),
and what a run logs (``learning_signal``, ``probe_kl``).

``from cwgrpo.trainer import CWGRPOConfig, CWGRPOTrainer`` imports TRL; importing a piece does not.
"""

__all__ = ["CWGRPOConfig", "CWGRPOTrainer"]


def __getattr__(name: str):
    if name in __all__:
        from cwgrpo.trainer import grpo

        return getattr(grpo, name)
    raise AttributeError(f"module 'cwgrpo.trainer' has no attribute {name!r}")
