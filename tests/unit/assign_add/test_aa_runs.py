"""Part II's training configurations and how they differ from the paper's (mechbook.assign_add.runs)."""

from __future__ import annotations

import dataclasses

from mechbook.assign_add.runs import CPU_RUN, QUARTER_RUN, TRAIN_PROFILES, differences_from_paper


def test_differences_from_the_paper_list_every_changed_setting():
    assert differences_from_paper(TRAIN_PROFILES["paper"]).empty
    table = differences_from_paper(QUARTER_RUN).set_index("setting")
    assert table.loc["model.d_model", "the paper"] == "128" and table.loc["model.d_model", "this run"] == "64"
    assert table.loc["steps", "this run"] == "8000" and table.loc["lr", "this run"] == "0.003"
    assert "model.seed" not in table.index and "task" not in table.index
    other_task = dataclasses.replace(
        TRAIN_PROFILES["paper"], task=dataclasses.replace(CPU_RUN.task, train_pair_fraction=0.5)
    )
    assert differences_from_paper(other_task).setting.tolist() == ["task"]


def test_what_a_run_saves_is_no_difference_from_the_paper():
    saves_otherwise = dataclasses.replace(TRAIN_PROFILES["paper"], keep_every=2000, keep_change=0.2, resume_every=1000)
    assert differences_from_paper(saves_otherwise).empty
    assert differences_from_paper(CPU_RUN).setting.tolist() == ["steps"]
