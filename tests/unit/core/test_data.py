"""The TinyStories loader (mechbook/data.py): where the text comes from, bad files, no network."""

from __future__ import annotations

import hashlib
import time

import pytest

from mechbook import data
from mechbook.data import SEPARATOR, TinyStoriesUnavailable, load_stories, split_stories, tinystories_file

TEXT = f"Tom had a red ball.\n{SEPARATOR}\nSue saw a big dog.\nIt was happy.\n{SEPARATOR}\n\n{SEPARATOR}\nThe end.\n"


@pytest.fixture
def no_sources(tmp_path, monkeypatch):
    """No env var, an empty private cache, and nothing forcing offline mode."""
    monkeypatch.delenv(data.ENV_VAR, raising=False)
    monkeypatch.delenv("MECHBOOK_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path / "cache"))
    return tmp_path


def _write(path, content: bytes | str):
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def test_explicit_path_wins_over_env(no_sources, monkeypatch):
    mine = _write(no_sources / "mine.txt", TEXT)
    other = _write(no_sources / "other.txt", f"Other.\n{SEPARATOR}\n")
    monkeypatch.setenv(data.ENV_VAR, str(other))
    assert load_stories(path=mine) == ["Tom had a red ball.", "Sue saw a big dog.\nIt was happy.", "The end."]
    assert load_stories() == ["Other."]
    assert load_stories(path=mine, max_stories=2) == load_stories(path=mine)[:2]


def test_missing_files_are_named(no_sources, monkeypatch):
    with pytest.raises(FileNotFoundError, match="path="):
        load_stories(path=no_sources / "nope.txt")
    monkeypatch.setenv(data.ENV_VAR, str(no_sources / "gone.txt"))
    with pytest.raises(FileNotFoundError, match=data.ENV_VAR):
        load_stories()


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "is empty"),
        (b"   \n\n", "is empty"),
        (b"just some text without separators", "does not look like TinyStories"),
        (b"caf\xe9 " + SEPARATOR.encode(), "not UTF-8"),
    ],
)
def test_bad_files_get_clear_errors(no_sources, content, message):
    bad = _write(no_sources / "bad.txt", content)
    with pytest.raises(ValueError, match=message):
        load_stories(path=bad)


def test_bad_split_is_rejected(no_sources):
    with pytest.raises(ValueError, match="split must be one of"):
        tinystories_file(split="test")


def _assert_unavailable_fast():
    start = time.monotonic()
    with pytest.raises(TinyStoriesUnavailable) as info:
        load_stories()
    assert time.monotonic() - start < 10
    message = str(info.value)
    assert "path=" in message and data.ENV_VAR in message and "network" in message


def test_offline_without_file_fails_fast_naming_both_ways_out(no_sources, monkeypatch):
    monkeypatch.setenv("MECHBOOK_OFFLINE", "1")
    _assert_unavailable_fast()


def test_unreachable_hub_fails_fast(no_sources, monkeypatch):
    def no_route(address, timeout=None):
        time.sleep(min(timeout or 0, 0.2))
        raise TimeoutError(f"connect to {address} timed out")

    monkeypatch.setattr(data.socket, "create_connection", no_route)
    _assert_unavailable_fast()


def test_socket_open_but_hub_not_answering_fails_fast(no_sources, monkeypatch):
    """Some networks accept any TCP connection (a proxy) yet cannot reach the Hub."""
    import huggingface_hub

    monkeypatch.setattr(data, "hub_reachable", lambda *a, **k: True)
    monkeypatch.setattr(huggingface_hub, "hf_hub_url", lambda *a, **k: "http://127.0.0.1:9/TinyStories-valid.txt")
    _assert_unavailable_fast()


def test_cached_download_used_only_when_checksum_matches(no_sources, monkeypatch):
    monkeypatch.setenv("MECHBOOK_OFFLINE", "1")
    cached = data._cached_file("valid")
    cached.parent.mkdir(parents=True)
    _write(cached, TEXT)
    side = cached.with_name(cached.name + ".sha256")
    side.write_text("0" * 64)
    with pytest.raises(TinyStoriesUnavailable):
        load_stories()
    side.write_text(hashlib.sha256(TEXT.encode()).hexdigest())
    assert len(load_stories()) == 3
    side.unlink()
    with pytest.raises(TinyStoriesUnavailable):
        load_stories()


def test_split_and_fingerprint():
    stories = split_stories(TEXT)
    assert len(stories) == 3 and all(s == s.strip() and s for s in stories)
    fp = data.data_fingerprint(stories)
    assert fp == data.data_fingerprint(list(stories))
    assert fp != data.data_fingerprint(stories[::-1])
    assert fp != data.data_fingerprint(["".join(stories)])


def test_the_offline_sample_loads_when_present(root):
    sample = root.parent / "shared" / "data" / "tinystories" / "tinystories-sample.txt"
    if not sample.exists():
        pytest.skip("the offline sample is not beside this checkout")
    assert len(load_stories(path=sample)) == 5042


def test_a_utf8_byte_order_mark_is_dropped_from_the_first_story(no_sources):
    bom = _write(no_sources / "bom.txt", b"\xef\xbb\xbf" + TEXT.encode())
    stories = load_stories(path=bom)
    assert stories[0] == "Tom had a red ball."
    assert stories == load_stories(path=_write(no_sources / "plain.txt", TEXT))


def test_fewer_stories_than_asked_warns_with_both_numbers(no_sources):
    small = _write(no_sources / "small.txt", TEXT)
    with pytest.warns(data.FewerStoriesWarning, match="holds 3 stories, fewer than the 5,000 asked for"):
        assert len(load_stories(path=small, max_stories=5000)) == 3


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "10"])
def test_max_stories_must_be_a_positive_whole_number(no_sources, bad):
    small = _write(no_sources / "small.txt", TEXT)
    with pytest.raises(ValueError, match="max_stories must be a whole number of at least 1"):
        load_stories(path=small, max_stories=bad)
