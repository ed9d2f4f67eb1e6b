"""cwgrpo_workflow.dag.command_options: every command's options checked at parse time by the command's own config
(the cw_* options' rules: tests/unit/test_trainer_options.py)."""

from __future__ import annotations

import pytest


def test_a_misspelt_command_option_gets_the_nearest_name():
    from cwgrpo.evaluate.options import EvalConfig
    from cwgrpo_workflow.dag.command_options import OptionError, check_options, check_train_options

    with pytest.raises(OptionError, match=r"'learnig_rate'.*; did you mean 'learning_rate'\?"):
        check_train_options({"learnig_rate": 1e-4})
    with pytest.raises(
        OptionError, match=r"unknown option 'tempreature' for EvalConfig; did you mean 'temperature'\?"
    ):
        check_options(EvalConfig, {"tempreature": 0.6})
    with pytest.raises(OptionError, match=r"unknown option 'zzz' for EvalConfig; known: \["):
        check_options(EvalConfig, {"zzz": 0.6})
