"""Chapter 6's checkpoint schedules, Hub names, and the bounded fall-back when offline."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechbook.pythia import hub
from mechbook.pythia.checkpoints import pythia_steps, repo_id, revision, scaled_schedule
from mechbook.pythia.hub import hub_available
from mechbook.pythia.sources import choose_source


def test_pythia_schedule_has_154_checkpoints_in_order():
    steps = pythia_steps()
    names = [revision(s) for s in steps]
    assert len(steps) == 154 and len(set(steps)) == 154
    assert names[0] == "step0" and names[-1] == "step143000"
    assert names[:11] == ["step0"] + [f"step{2**i}" for i in range(10)]
    assert names[names.index("step512") + 1] == "step1000"
    assert steps == sorted(steps)
    assert all(b - a == 1000 for a, b in zip(steps[11:], steps[12:]))


def test_names_and_bad_input():
    assert repo_id("1.4b") == "EleutherAI/pythia-1.4b"  # the paper's Pythia-1.4B, trained on the Pile
    assert repo_id("70m", deduped=True) == "EleutherAI/pythia-70m-deduped"
    with pytest.raises(ValueError, match="choose one of"):
        repo_id("1.5b")
    with pytest.raises(ValueError, match="non-negative integer"):
        revision(-1)
    with pytest.raises(ValueError, match="multiple"):
        scaled_schedule(1000, 300)


@given(st.integers(1, 40), st.integers(1, 300))
def test_scaled_schedule_shape(n_linear, every):
    last = n_linear * every
    steps = scaled_schedule(last, every)
    powers = [s for s in steps if 0 < s < every]
    assert steps[0] == 0 and steps[-1] == last
    assert powers == [2**i for i in range(len(powers))] and (not powers or powers[-1] * 2 >= every)
    assert steps[len(powers) + 1 :] == list(range(every, last + 1, every))


def test_offline_flag_falls_back_at_once(monkeypatch):
    monkeypatch.setenv("MECHBOOK_OFFLINE", "1")
    start = time.monotonic()
    assert hub_available() is False
    assert choose_source("auto") == ("miniature", "the Hugging Face Hub did not answer within 5 s")
    assert time.monotonic() - start < 1.0
    with pytest.raises(RuntimeError, match="source='miniature'"):
        choose_source("pythia")


def test_unreachable_host_falls_back_within_the_deadline(monkeypatch):
    monkeypatch.delenv("MECHBOOK_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    start = time.monotonic()
    assert hub_available(deadline=2.0, host="hub.invalid") is False  # a name that never resolves
    assert hub_available(deadline=2.0, host="10.255.255.1") is False  # not the Hub, even if a proxy accepts
    assert time.monotonic() - start < 10.0


def test_a_hanging_check_is_abandoned_at_the_deadline(monkeypatch):
    monkeypatch.setattr(hub, "hub_reachable", lambda timeout, host: time.sleep(30) or True)
    start = time.monotonic()
    assert hub_available(deadline=1.0) is False
    assert time.monotonic() - start < 2.0


def test_unknown_source_is_an_error():
    with pytest.raises(ValueError, match="auto"):
        choose_source("gpt2")


def test_the_paper_profile_stops_at_once_offline_and_says_what_to_do(monkeypatch):
    from mechbook.pythia.study import STUDY_PROFILES, build_source

    monkeypatch.setenv("MECHBOOK_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="source='pythia' needs the Hugging Face Hub"):
        build_source(STUDY_PROFILES["paper"])  # never trains the miniature instead
    assert time.monotonic() - start < 1.0


def test_web_texts_reads_shards_in_order_until_it_has_enough(monkeypatch, tmp_path):
    import huggingface_hub
    import pandas as pd

    shards = {
        "sample/10BT/000_00000.parquet": ["x" * 600, "short", "y" * 512],
        "sample/10BT/000_00001.parquet": ["z" * 700, "w" * 800],
        "sample/10BT/000_00002.parquet": ["never read" * 100],
    }
    for name, texts in shards.items():
        (tmp_path / name.replace("/", "_")).parent.mkdir(exist_ok=True)
        pd.DataFrame({"text": texts, "id": range(len(texts))}).to_parquet(tmp_path / name.replace("/", "_"))
    fetched = []

    class Api:
        def list_repo_files(self, repo, repo_type, revision):
            assert (repo, repo_type, revision) == ("HuggingFaceFW/fineweb", "dataset", "main")
            return ["README.md", "data/CC-MAIN/000.parquet", *reversed(shards)]

    def download(repo, name, repo_type, revision):
        fetched.append(name)
        return str(tmp_path / name.replace("/", "_"))

    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    assert hub.web_texts("fineweb", 3) == ["x" * 600, "y" * 512, "z" * 700]
    assert fetched == list(shards)[:2]  # in name order, and no further than needed
    with pytest.raises(ValueError, match="only 5 FineWeb texts have 512\\+ characters"):
        hub.web_texts("fineweb", 6)
    with pytest.raises(ValueError, match="unknown text 'pile'"):
        hub.web_texts("pile", 5)
    assert hub.MIN_CHARS == 512 and hub.PAPER_N_TEXTS == 100_000 and set(hub.TEXTS) >= {"openwebtext", "fineweb"}
