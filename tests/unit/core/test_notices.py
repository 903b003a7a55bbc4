"""The console says what matters (issue 22, item 5): warnings that change what a reader gets are
relayed once each to the executor's console; kernel transport chatter is not."""

from __future__ import annotations

import io
import json

import pytest

from mechbook import notices
from mechbook.book.relay import Relay


def test_notice_warns_and_appends_to_the_executors_file(tmp_path, monkeypatch):
    file = tmp_path / "notices.jsonl"
    monkeypatch.setenv(notices.NOTICES_ENV, str(file))
    with pytest.warns(UserWarning, match="cache is read-only"):
        notices.notice("cache is read-only")
    assert [json.loads(line)["message"] for line in file.read_text().splitlines()] == ["cache is read-only"]
    monkeypatch.delenv(notices.NOTICES_ENV)
    with pytest.warns(UserWarning):
        notices.notice("not relayed")
    assert len(file.read_text().splitlines()) == 1


def test_relay_prints_each_notice_once_and_waits_for_whole_lines():
    stream = io.StringIO()
    relay = Relay("ch", stream=stream, live=False)
    try:
        line = json.dumps({"category": "UserWarning", "message": "recomputed entry x"}) + "\n"
        relay.notices.write_text(line + line + '{"category": "UserWarning", "mess')
        relay.relay_notices()
        assert stream.getvalue() == "ch: warning: recomputed entry x\n"
        with relay.notices.open("a") as fh:
            fh.write('age": "fewer stories"}\n' + line)
        relay.relay_notices()
        assert stream.getvalue().splitlines() == ["ch: warning: recomputed entry x", "ch: warning: fewer stories"]
    finally:
        relay._dir.cleanup()


WARNING_CELL = """
import warnings
from pathlib import Path
from mechbook import cache, data
Path("tiny.txt").write_text("one story\\n<|endoftext|>\\ntwo stories\\n")
for _ in range(2):
    stories = data.load_stories(path="tiny.txt", max_stories=50)
value = cache.cached("t/unpicklable", {"k": 1}, lambda: (lambda: 1))
"""


def _noticed(file) -> list[str]:
    return [json.loads(line)["message"] for line in file.read_text().splitlines()] if file.exists() else []


def test_a_read_only_cache_and_a_recomputed_entry_are_notices(tmp_path, monkeypatch):
    import errno

    import torch

    from mechbook import cache

    file = tmp_path / "notices.jsonl"
    monkeypatch.setenv(notices.NOTICES_ENV, str(file))
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path / "cache"))
    value = cache.cached("t/n", {"k": 1}, lambda: torch.ones(3))
    assert _noticed(file) == []
    [entry] = (tmp_path / "cache" / "t" / "n").glob("*.pt")
    entry.write_bytes(entry.read_bytes() + b"x")
    with pytest.warns(UserWarning, match="does not match its checksum; recomputing it"):
        assert torch.equal(cache.cached("t/n", {"k": 1}, lambda: torch.ones(3)), value)
    assert len(_noticed(file)) == 1 and "recomputing it" in _noticed(file)[0]

    def denied(path, data):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(cache, "atomic_write_bytes", denied)
    with pytest.warns(UserWarning, match="could not write the cache entry"):
        assert torch.equal(cache.cached("t/n", {"k": 2}, lambda: torch.zeros(3)), torch.zeros(3))
    assert "could not write the cache entry" in _noticed(file)[-1] and "Permission denied" in _noticed(file)[-1]
