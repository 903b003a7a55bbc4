"""The plan's ETA on this machine (issue 31, item 2): the shipped per-chapter times scaled by a
calibration of this machine against the one that measured them, this machine's own times used
as they are, and a slowed machine getting a longer ETA. Ratios only, never absolute times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_execute import _tiny_repo

from mechbook.book import calibrate, costs, run
from mechbook.book.config import ExecuteConfig


def _shipped(repo: Path, reference: dict | None, times: dict[str, float]) -> None:
    path = costs.costs_path(repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = {"smoke": times, **({calibrate.REFERENCE_KEY: reference} if reference else {})}
    path.write_text(json.dumps(table), encoding="utf-8")


def _planned(repo: Path) -> list[tuple[Path, bool]]:
    return [(Path("book/p/01_ok.ipynb"), True), (Path("book/p/02_bad.ipynb"), True)]


def test_shipped_times_scale_by_the_calibration_ratio_and_this_machines_own_do_not(tmp_path):
    repo = _tiny_repo(tmp_path)
    _shipped(repo, {"cpu": "Reference CPU, 2 cores", "steps_per_s": 200.0}, {"01_ok": 100.0, "02_bad": 50.0})
    costs.save_costs(repo, "smoke", {"01_ok": 30.0})
    cfg = ExecuteConfig(profile="smoke", root=repo)
    half_speed = run.plan_lines(cfg, _planned(repo), rate=100.0)
    assert "  run     book/p/01_ok.ipynb  (~30 s)" in half_speed, "this machine's own time, unscaled"
    assert "  run     book/p/02_bad.ipynb  (~1 min 40 s, extrapolated)" in half_speed
    assert "ETA: 2 min 10 s" in half_speed
    assert half_speed[-1].startswith("  extrapolated: 1 chapter time(s) measured on Reference CPU, 2 cores, x2.00")
    assert "100 training steps/s here, 200 there" in half_speed[-1]
    double = run.estimate_plan(cfg, ["01_ok", "02_bad"], rate=400.0)
    assert double.costs == {"01_ok": 30.0, "02_bad": 25.0} and double.extrapolated == {"02_bad"}


def test_nothing_is_calibrated_when_every_time_is_this_machines_own(tmp_path, monkeypatch):
    repo = _tiny_repo(tmp_path)
    _shipped(repo, {"cpu": "Reference CPU", "steps_per_s": 200.0}, {"01_ok": 100.0, "02_bad": 50.0})
    costs.save_costs(repo, "smoke", {"01_ok": 30.0, "02_bad": 20.0})
    monkeypatch.setattr(calibrate, "calibrate", lambda *a, **k: pytest.fail("calibrated for nothing"))
    lines = run.plan_lines(ExecuteConfig(profile="smoke", root=repo), _planned(repo))
    assert lines[-1] == "ETA: 50 s"


def test_shipped_times_without_a_reference_are_said_to_be_unscaled(tmp_path):
    repo = _tiny_repo(tmp_path)
    _shipped(repo, None, {"01_ok": 100.0, "02_bad": 50.0})
    lines = run.plan_lines(ExecuteConfig(profile="smoke", root=repo), _planned(repo))
    assert "ETA: 2 min 30 s" in lines and "not scaled" in lines[-1]


def test_the_figure_is_steps_over_the_time_they_took():
    def clock(tick: float):
        now = [0.0]

        def read() -> float:
            now[0] += tick
            return now[0]

        return read

    quick = calibrate.calibrate(seconds=0.05, clock=clock(0.01))
    slowed = calibrate.calibrate(seconds=0.05, clock=clock(0.02))
    assert quick == pytest.approx(2 * slowed), "the same steps in twice the time: half the figure"
    assert calibrate.slowdown(quick, slowed) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="positive"):
        calibrate.slowdown(0.0, 1.0)


def test_a_chapter_that_read_everything_from_cache_gives_the_second_figure_not_the_cold_one(tmp_path):
    """A re-execution over cached models takes minutes where a cold build takes an hour: its time
    is kept apart (warm), the plan's ETA stays the cold one and says so, and the warm one follows."""
    repo = _tiny_repo(tmp_path)
    _shipped(repo, None, {"01_ok": 600.0, "02_bad": 300.0})
    costs.save_costs(repo, "smoke", {"01_ok": 6.0, "02_bad": 3.0}, cold=False)
    assert costs.load_costs(repo)["smoke"] == {"01_ok": 600.0, "02_bad": 300.0}
    assert costs.warm_costs(repo, "smoke") == {"01_ok": 6.0, "02_bad": 3.0}
    lines = run.plan_lines(ExecuteConfig(profile="smoke", root=repo), _planned(repo))
    assert "ETA: 15 min 00 s if the chapters compute their models (an empty model cache)" in lines
    assert "  if their models are cached (as when this machine last ran them): ~9 s" in lines
    costs.save_costs(repo, "smoke", {"01_ok": 700.0}, cold=True)  # a later cold run: its own time wins
    assert costs.load_costs(repo)["smoke"]["01_ok"] == 700.0 and costs.warm_costs(repo, "smoke")["01_ok"] == 6.0


def test_without_warm_times_the_plan_gives_one_figure(tmp_path):
    repo = _tiny_repo(tmp_path)
    _shipped(repo, None, {"01_ok": 600.0, "02_bad": 300.0})
    lines = run.plan_lines(ExecuteConfig(profile="smoke", root=repo), _planned(repo))
    assert "ETA: 15 min 00 s" in lines and not any("cached" in line for line in lines[1:])
