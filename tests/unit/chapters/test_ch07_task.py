"""Chapter 7's module: knob validation, tables against slow literal counts, the claims on each side
of their rules with their sentences, the sequence explorer's data and its note when a 2-var
sequence is asked with one assignment."""

from __future__ import annotations

import pytest

from mechbook.assign_add.baselines import best_constant, chance
from mechbook.assign_add.claims import CH07_CLAIMS, TaskReadings
from mechbook.assign_add.readings import read_task, task_numbers
from mechbook.assign_add.task import KIND_NAMES, POOL_NAMES, Task, TaskConfig
from mechbook.chapters import ch07_task as ch07
from mechbook.claims import evidence

TASK = Task()
SMALL = Task(TaskConfig(modulus=7, n_vars=6, max_assignments=3, seq_len=10, no_right=("a",), no_left=("f",)))


def test_profiles_share_the_task_and_grow():
    assert set(ch07.CONFIGS) == {"smoke", "cpu", "paper"}
    sizes = [ch07.CONFIGS[p].n_per_pool for p in ("smoke", "cpu", "paper")]
    assert sizes == sorted(sizes) and len(set(sizes)) == 3
    assert all(c.task == TaskConfig() for c in ch07.CONFIGS.values())


@pytest.mark.parametrize(
    "knob, value, error, words",
    [
        ("n_per_pool", -5, ValueError, "at least 1"),
        ("n_per_pool", 0, ValueError, "at least 1"),
        ("n_per_pool", "abc", TypeError, "int"),
        ("n_per_pool", True, TypeError, "int"),
        ("seed", 1.5, TypeError, "int"),
        ("seed", -1, ValueError, "at least 0"),
    ],
)
def test_bad_knobs_are_refused_with_the_knob_named(knob, value, error, words):
    with pytest.raises(error, match=knob) as info:
        ch07.resolve("smoke", **{knob: value})
    assert words in str(info.value)


def test_knobs_override_the_profile():
    cfg = ch07.resolve("cpu", n_per_pool=7, seed=3)
    assert (cfg.n_per_pool, cfg.seed) == (7, 3)
    assert ch07.resolve("cpu") == ch07.CONFIGS["cpu"]


def test_split_frame_matches_the_task():
    frame = ch07.split_frame(SMALL)
    n = SMALL.cfg.modulus
    assert len(frame) == n * n
    for row in frame.itertuples():
        assert row.sum == (row.n1 + row.n2) % n
        assert (row.split == "training pair") == bool(SMALL.train_pairs[row.n1, row.n2])


def test_variable_pairs_frame_statuses_by_a_literal_rule():
    frame = ch07.variable_pairs_frame(SMALL)
    cfg = SMALL.cfg
    for row in frame.itertuples():
        if row.v1 == row.v2:
            expected = "same variable"
        elif row.v1 in cfg.no_left or row.v2 in cfg.no_right:
            expected = "misplaced: held out"
        else:
            expected = "allowed in training"
        assert row.status == expected
    assert (frame.status == "allowed in training").sum() == int(SMALL.allowed_two_var.sum())


def _ev(readings: TaskReadings) -> dict:
    """The notebook's cell: the evidence, computed once from the chapter's readings."""
    return evidence(CH07_CLAIMS, readings)


def test_rows_table_and_its_sentence():
    table = ch07.rows_table(TASK)
    assert list(table.kind) == list(KIND_NAMES)
    assert table.rows.sum() == len(TASK.train_rows)
    literal = sum(1 for r in TASK.train_rows if r[1] == 3) / len(TASK.train_rows)
    assert table.share.iloc[3] == pytest.approx(literal)
    text = ch07.rows_prose(table, _ev(TaskReadings(TASK)))
    assert f"{literal:.1%}" in text and f"{len(TASK.train_rows):,}" in text
    assert "**Reproduced.** The paper (about 24%)" in text


def test_pool_table_counts_questions():
    pools = TASK.eval_pools(5, seed=0)
    table = ch07.pool_table(TASK, pools).set_index("pool")
    assert list(table.index) == list(POOL_NAMES)
    assert (table["sequences drawn"] == 5).all()
    assert table.loc["0var_heldout", "distinct questions"] == TASK.cfg.n_vars * int(TASK.heldout_pairs.sum())
    assert table.loc["2var_train", "distinct questions"] == int(TASK.allowed_two_var.sum()) * int(
        TASK.train_pairs.sum()
    )


def test_pool_table_and_prose_show_chance_and_the_constant_answer():
    pools = TASK.eval_pools(50, seed=0)
    table = ch07.pool_table(TASK, pools).set_index("pool")
    for name in POOL_NAMES:
        assert table.loc[name, "best constant answer"] == best_constant(pools[name][1]) >= chance(TASK.cfg.modulus)
    readings = TaskReadings(TASK, pools)
    text = ch07.pools_prose(readings, _ev(readings))
    assert "1/59 = 0.017 (**chance**)" in text
    assert f"from {table['best constant answer'].min():.3f} to {table['best constant answer'].max():.3f}" in text


def test_label_prose_states_the_count_and_its_claim():
    readings = read_task(TASK.cfg, 4, 1)
    text = ch07.label_prose(readings, _ev(readings))
    assert "**0** of 36" in text and "**Holds.**" in text
    tokens, labels = readings.pools["1var_train"]
    broken = TaskReadings(TASK, dict(readings.pools, **{"1var_train": (tokens, (labels + 1) % TASK.cfg.modulus)}))
    text = ch07.label_prose(broken, _ev(broken))
    assert "**4** of 36" in text and "**Does not hold.**" in text


def test_the_papers_task_meets_every_claim_and_another_split_does_not():
    found = evidence(CH07_CLAIMS, TaskReadings(TASK, TASK.eval_pools(3, 0)))
    assert {i: e.verdict for i, e in found.items()} == {c.id: "reproduced" for c in CH07_CLAIMS}
    half = evidence(CH07_CLAIMS, TaskReadings(Task(TaskConfig(train_pair_fraction=0.5))))
    assert half["ch07.heldout_pairs"].verdict == "not reproduced"
    assert half["ch07.label_errors"].verdict == "untested"  # no pools drawn: nothing to check the labels on
    sparse = evidence(CH07_CLAIMS, TaskReadings(Task(TaskConfig(train_pair_fraction=0.01))))
    assert sparse["ch07.sums_covered"].verdict == "not reproduced"
    sparse_task = Task(TaskConfig(train_pair_fraction=0.01))
    assert "**Does not hold.**" in ch07.split_prose(sparse_task, _ev(TaskReadings(sparse_task)))


@pytest.mark.parametrize("kind", KIND_NAMES)
@pytest.mark.parametrize("assignments", [1, 3, 6])
def test_draw_sequence_has_the_asked_layout(kind, assignments):
    frame = ch07.draw_sequence(TASK, kind, assignments, seed=2)
    cfg = TASK.cfg
    assert list(frame.position) == list(range(cfg.seq_len))
    used = max(assignments, 2 if kind == "2-var" else 1)
    assert (frame.role == "variable").sum() == used == (frame.role == "value").sum()
    assert (frame.role == "query").sum() == cfg.query_len
    noted = "needs 2 assignments: drawn with 2, not 1" in frame.program.iloc[0]
    assert noted == (kind == "2-var" and assignments == 1)


def test_draw_sequence_refuses_bad_input():
    with pytest.raises(ValueError, match="unknown kind"):
        ch07.draw_sequence(TASK, "3-var", 2, seed=0)
    with pytest.raises(ValueError, match=r"assignments must be in 1\.\.6"):
        ch07.draw_sequence(TASK, "0-var", 7, seed=0)


def test_charts_state_the_counts():
    split = ch07.split_chart(TASK).to_dict()
    assert split["title"].startswith(f"{int(TASK.heldout_pairs.sum()):,} of the 3,481")
    pairs = ch07.variable_pairs_chart(TASK).to_dict()
    assert pairs["title"].startswith(f"{int(TASK.allowed_two_var.sum())} ordered")
    assert "n₂" in split["encoding"]["x"]["title"]


def test_record_all_records_the_threshold_names_and_the_claims(monkeypatch):
    seen = {}
    monkeypatch.setattr(ch07.mechbook, "record", lambda name, value: seen.setdefault(name, value))
    readings = read_task(TASK.cfg, 3, 0)
    assert readings.pools.keys() == TASK.eval_pools(3, seed=0).keys()
    values = ch07.record_all(readings, _ev(readings))
    assert values == seen
    assert values["heldout_pairs"] + values["train_pairs"] == TASK.cfg.modulus**2
    assert values["pool_sizes"] == {name: 3 for name in POOL_NAMES}
    assert values["label_errors"] == 0 and values["chance"] == pytest.approx(1 / 59)
    assert {f"claim.{c.id}" for c in CH07_CLAIMS} <= set(values)
    assert values["claim.ch07.heldout_pairs"]["verdict"] == "reproduced"


def test_the_config_itself_refuses_wrong_types():
    with pytest.raises(TypeError, match=r"ChapterConfig\.seed must be an int, got float 1.5"):
        ch07.ChapterConfig(n_per_pool=3, seed=1.5)
    with pytest.raises(TypeError, match="task must be a TaskConfig"):
        ch07.ChapterConfig(n_per_pool=3, seed=0, task="paper")


def test_task_numbers_match_the_tables_the_page_shows():
    readings = read_task(TASK.cfg, 3, 0)
    numbers = task_numbers(readings)
    rows = ch07.rows_table(TASK)
    table = ch07.pool_table(TASK, readings.pools)
    assert numbers["train_rows"] == int(rows.rows.sum()) and numbers["two_var_share"] == float(rows.share.iloc[3])
    assert numbers["max_constant_answer"] == float(table["best constant answer"].max())
    with pytest.raises(ValueError, match="needs the evaluation pools"):
        task_numbers(TaskReadings(TASK))
