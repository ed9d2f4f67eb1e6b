"""cwgrpo_workflow.dag.command_options: every command's options checked at parse time by the command's own config
(the cw_* options' rules: tests/unit/test_trainer_options.py)."""

from __future__ import annotations

import re

import pytest


def test_a_misspelt_command_option_gets_the_nearest_name():
    from cwgrpo.configs import OptionError
    from cwgrpo.evaluate.options import EvalConfig
    from cwgrpo_workflow.dag.command_options import check_options
    from tests.unit.test_train_options import first_error

    misspelt = first_error({"learnig_rate": 1e-4})
    assert re.search(r"'learnig_rate'.*; did you mean 'learning_rate'\?", str(misspelt))
    with pytest.raises(
        OptionError, match=r"unknown option 'tempreature' for EvalConfig; did you mean 'temperature'\?"
    ):
        check_options(EvalConfig, {"tempreature": 0.6})
    with pytest.raises(OptionError, match=r"unknown option 'zzz' for EvalConfig; known: \["):
        check_options(EvalConfig, {"zzz": 0.6})


def test_training_options_are_judged_in_the_jobs_python_once(tmp_path, monkeypatch):
    """The dry run judges each distinct training options set by the job's own config in one process of the
    jobs' interpreter, naming the preset key; a set that passed is not judged again (a repeated dry run)."""
    import os
    import sys

    import yaml

    from cwgrpo_workflow.dag import machine, options
    from cwgrpo_workflow.dag.command_options import judged_in_jobs_python, train_errors
    from tests.unit.test_train_options import REPO

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["methods"]["grpo"]["lr_scheduler_type"] = "constnt"
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "CWGRPO_TRAIN_PYTHON": sys.executable, "PYTHONPATH": pythonpath}
    notes, passed = [], []
    judge = judged_in_jobs_python(env, tmp_path, notes, passed)
    errors = list(train_errors(config, judge))
    assert notes == [] and {where for where, _ in errors} == {"methods.grpo.lr_scheduler_type"}, errors
    assert errors[0][1].startswith("constnt is not a valid SchedulerType, please select one of")
    assert len(passed) == 6 and list(tmp_path.iterdir()) == []  # the other three methods of each size
    options.write_option_files((mark, "") for mark in passed)  # as the workflow does once its parse passed

    asked = []

    def ask(request, *_):
        asked.append(request["texts"])
        return [[] for _ in request["texts"]]

    monkeypatch.setattr(machine, "ask_train_python", ask)
    passed.clear()
    again = judged_in_jobs_python(env, tmp_path, notes, passed)  # the next dry run's: the two failed sets
    assert list(train_errors(config, again)) == []
    assert [len(texts) for texts in asked] == [2] and all("constnt" in text for text in asked[0])
    options.write_option_files((mark, "") for mark in passed)
    asked.clear()
    assert list(train_errors(config, judged_in_jobs_python(env, tmp_path, notes, []))) == [] and asked == []


def test_a_jobs_python_that_cannot_judge_leaves_a_note(tmp_path):
    import yaml

    from cwgrpo_workflow.dag.command_options import judged_in_jobs_python, train_errors
    from tests.unit.test_train_options import REPO

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    notes, passed = [], []
    judge = judged_in_jobs_python({"CWGRPO_TRAIN_PYTHON": str(tmp_path / "none")}, tmp_path, notes, passed)
    assert list(train_errors(config, judge)) == [] and passed == []
    (note,) = notes
    assert note.startswith(
        f"note: could not check the training options in the jobs' Python ({tmp_path / 'none'})"
    )
    assert list(tmp_path.iterdir()) == []
