"""Progress bars (mechbook/progress.py) and their relay to the console (mechbook/book/relay.py)."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechbook import progress as progress_mod
from mechbook.book.relay import Relay, format_bars, format_seconds
from mechbook.progress import PROGRESS_ENV, progress


@pytest.fixture
def side(tmp_path, monkeypatch):
    path = tmp_path / "bars.json"
    monkeypatch.setenv(PROGRESS_ENV, str(path))
    monkeypatch.setenv("MECHBOOK_QUIET", "1")
    return path


def _bars(path):
    return json.loads(path.read_text())["bars"]


def test_relayed_bars_write_their_state_outermost_first_and_print_nothing(side, capsys):
    outer = progress(range(3), desc="sweep")
    seen = []
    for _i in outer:
        for _j in progress(range(5), desc="training", unit="step", mininterval=0):
            seen.append(_bars(side))
    assert [b["desc"] for b in seen[-1]] == ["sweep", "training"]
    inner = [bars[1] for bars in seen]
    assert [b["n"] for b in inner[:5]] == [0, 1, 2, 3, 4] and {b["total"] for b in inner} == {5}
    assert all(b["unit"] == "step" for b in inner)
    assert _bars(side) == [], "closed bars leave the file"
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_relayed_bars_are_throttled_by_mininterval(side, monkeypatch):
    writes = []
    real = progress_mod._write_states
    monkeypatch.setattr(progress_mod, "_write_states", lambda p: writes.append(1) or real(p))
    for _ in progress(range(10_000), desc="fast", mininterval=60):
        pass
    assert len(writes) <= 3, "at start, maybe once more, and at the close"


def test_without_the_side_channel_quiet_bars_are_disabled(monkeypatch):
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    monkeypatch.setenv("MECHBOOK_QUIET", "1")
    assert progress(range(3)).disable


@given(st.floats(0, 10**6, allow_nan=False))
def test_format_seconds_reads_back_to_the_rounded_seconds(seconds):
    text = format_seconds(seconds)
    parts = text.split()
    values = dict(zip(parts[1::2], map(int, parts[0::2])))
    total = values.get("h", 0) * 3600 + values.get("min", 0) * 60 + values.get("s", 0)
    assert total == int(round(seconds)) - (int(round(seconds)) % 60 if "h" in values else 0)


def test_format_bars_names_every_bar_and_the_innermost_pace():
    bars = [
        {"desc": "sweep", "n": 2, "total": 6, "unit": "it", "rate": 0.01, "remaining": 400},
        {"desc": "training", "n": 1200, "total": 8000, "unit": "step", "rate": 41.25, "remaining": 164.8},
    ]
    assert format_bars("[3/12] 03_training", bars) == (
        "[3/12] 03_training: sweep 2/6 › training 1,200/8,000 · 41.2 step/s · 2 min 45 s left"
    )
    assert format_bars("x", []) == "x: running"
    assert format_bars("x", [{"desc": "", "n": 5, "total": None}]) == "x: 5 · ? it/s · ? left"


def test_relay_shows_changes_live_in_place_or_throttled_in_a_log():
    state = {"bars": [{"desc": "d", "n": 1, "total": 4, "rate": 2.0, "remaining": 1.5}]}
    live = io.StringIO()
    relay = Relay("c", stream=live, live=True)
    relay.poll()
    assert live.getvalue() == "", "nothing before the kernel writes"
    relay.path.write_text(json.dumps(state))
    relay.poll()
    relay.poll()
    assert live.getvalue() == "\r\x1b[2Kc: d 1/4 · 2.0 it/s · 2 s left"
    log = io.StringIO()
    relay = Relay("c", stream=log, live=False, every=3600)
    relay.path.write_text(json.dumps(state))
    relay.poll()
    state["bars"][0]["n"] = 2
    relay.path.write_text(json.dumps(state))
    relay.poll()
    assert log.getvalue() == "c: d 1/4 · 2.0 it/s · 2 s left\n"
    relay.path.write_text("{half")
    relay.poll()
    assert relay.read() is None
