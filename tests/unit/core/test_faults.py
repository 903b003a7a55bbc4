"""One sentence per failure (issue 22, items 3, 4 and 6): bad environment variables, unwritable
targets, unserialisable cache values, harness names as knobs; each ends in one line that names
the path or variable and says what to do, with a non-zero exit and no traceback unless --debug."""

from __future__ import annotations

import errno
import json
import os
import warnings
from pathlib import Path

import pytest
import torch

from mechbook import arguments, cache, cache_bundle, data
from mechbook.__main__ import main
from mechbook.assign_add import release
from mechbook.book.config import HARNESS_NAMES, ExecuteConfig
from mechbook.book.environment import check_environment
from mechbook.device import DeviceUnavailable, check_device, default_device


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A clean environment: a fresh cache, no data or device variables, no debug."""
    for name in ("MECHBOOK_TINYSTORIES", "MECHBOOK_AA_RELEASE", "MECHBOOK_DEVICE", "MECHBOOK_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path / "cache"))
    return tmp_path


def _one_line_error(capsys, *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    return err


def _denied(path, *args, **kwargs):
    raise PermissionError(errno.EACCES, "Permission denied", str(path))


def test_cache_export_to_an_unwritable_target_is_one_line(env, monkeypatch, capsys):
    cache.cached("t/one", {"k": 1}, lambda: torch.ones(2))  # something to export
    monkeypatch.setattr(cache_bundle, "atomic_write_bytes", _denied)
    target = env / "locked" / "bundle.tar"
    assert main(["cache", "export", str(target)]) == 1
    _one_line_error(capsys, str(target), "Permission denied", "choose a path you can write to")


def test_cache_import_into_an_unwritable_cache_is_one_line(env, monkeypatch, capsys):
    calls: list = []
    cache.cached("t/one", {"k": 1}, lambda: calls.append(1) or torch.ones(2))
    bundle = env / "b.tar"
    assert main(["cache", "export", str(bundle)]) == 0
    capsys.readouterr()
    monkeypatch.setattr(cache, "atomic_write_bytes", _denied)
    assert main(["cache", "import", str(bundle)]) == 1
    _one_line_error(capsys, "cannot install into the cache", "MECHBOOK_CACHE", "Permission denied")


@pytest.mark.parametrize("below", [False, True], ids=["file", "under-a-file"])
def test_mechbook_cache_naming_a_file_is_one_line_naming_the_variable(env, monkeypatch, capsys, below):
    file = env / "a-file"
    file.write_text("x")
    value = file / "sub" if below else file
    monkeypatch.setenv("MECHBOOK_CACHE", str(value))
    with pytest.raises(cache.CacheRootError, match=r"MECHBOOK_CACHE=.*not a folder: set MECHBOOK_CACHE"):
        cache.cache_root()
    assert main(["cache", "export", str(env / "b.tar")]) == 1
    _one_line_error(capsys, f"MECHBOOK_CACHE={value}", "not a folder")


@pytest.mark.parametrize("value", ["gpu", "cuda:not-a-number", "meta"])
def test_a_device_torch_does_not_know_is_one_line(env, monkeypatch, value):
    with pytest.raises(DeviceUnavailable, match=rf"MECHBOOK_DEVICE='{value}'"):
        check_device(value)
    monkeypatch.setenv("MECHBOOK_DEVICE", value)
    with pytest.raises(DeviceUnavailable):
        default_device()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_one_line(env, monkeypatch, capsys):
    monkeypatch.setenv("MECHBOOK_DEVICE", "cuda")
    assert check_environment() == ["MECHBOOK_DEVICE='cuda' but torch sees no CUDA device here: unset it or use cpu"]
    assert main(["execute", "--profile", "smoke", "--only", "07_task"]) == 1
    _one_line_error(capsys, "MECHBOOK_DEVICE='cuda'", "use cpu")


def test_cpu_is_always_a_device(env, monkeypatch):
    monkeypatch.setenv("MECHBOOK_DEVICE", "cpu")
    assert default_device() == "cpu" and check_environment() == []


def test_data_variables_are_checked_at_start_up(env, monkeypatch):
    monkeypatch.setenv("MECHBOOK_TINYSTORIES", str(env / "missing.txt"))
    monkeypatch.setenv("MECHBOOK_AA_RELEASE", str(env / "cache"))
    (env / "cache" / "checkpoints").mkdir(parents=True)
    (env / "cache" / "checkpoints" / "model_state_dict.pth").write_bytes(b"")
    assert check_environment() == [
        f"MECHBOOK_TINYSTORIES={env / 'missing.txt'} does not exist: set it to an "
        "existing TinyStories text file, or unset it"
    ]
    (env / "release.txt").write_text("x")
    monkeypatch.setenv("MECHBOOK_AA_RELEASE", str(env / "release.txt"))
    problems = check_environment()
    assert len(problems) == 2 and problems[1].startswith(f"MECHBOOK_AA_RELEASE={env / 'release.txt'} is the wrong kind")


def test_cached_warns_and_returns_a_value_it_cannot_serialise(env):
    def compute():
        return lambda: 42  # torch.save cannot pickle a lambda

    with pytest.warns(UserWarning, match="could not serialise the value of the cache entry"):
        value = cache.cached("t/unpicklable", {"k": 1}, compute)
    assert value() == 42
    assert not list((Path(os.environ["MECHBOOK_CACHE"]) / "t" / "unpicklable").glob("*.pt"))


@pytest.mark.parametrize("name", sorted(HARNESS_NAMES))
def test_harness_names_are_refused_as_knobs(name):
    with pytest.raises(ValueError, match=rf"--knob {name}=\.\.\. is refused: .* use {HARNESS_NAMES[name].split()[0]}"):
        ExecuteConfig(profile="smoke", knobs=((name, "cpu"),))


@pytest.mark.parametrize("lanes", [2.5, 0, True, "2"])
def test_a_library_caller_gets_a_value_error_not_an_exit(lanes):
    """ExecuteConfig is a library class: a bad field raises ValueError (the command line prints
    its one line), never SystemExit, which would end a caller's process."""
    with pytest.raises(ValueError, match=r"lanes \(--lanes N\) must be a whole number of at least 1"):
        ExecuteConfig(profile="smoke", lanes=lanes)
    with pytest.raises(ValueError, match="unknown profile 'nope'"):
        ExecuteConfig(profile="nope")


def test_knob_profile_on_the_command_line_points_to_the_option(env, capsys):
    assert main(["execute", "--profile", "smoke", "--knob", "profile=cpu"]) == 1
    _one_line_error(capsys, "--knob profile=... is refused", "use --profile P")


def test_spread_refuses_a_seed_knob(env, capsys):
    assert main(["spread", "--profile", "smoke", "--seeds", "2", "--knob", "seed=3", "--only", "07_task"]) == 1
    _one_line_error(capsys, "--knob seed=... is refused", "--seeds N")


def test_an_unexpected_error_is_one_line_unless_debug(env, monkeypatch, capsys):
    missing = env / "no-book"
    assert main(["execute", "--profile", "smoke", "--root", str(missing)]) == 1
    _one_line_error(capsys, str(missing / "_toc.yml"), "--debug")
    with pytest.raises(FileNotFoundError):
        main(["--debug", "execute", "--profile", "smoke", "--root", str(missing)])
    monkeypatch.setenv("MECHBOOK_DEBUG", "1")
    with pytest.raises(FileNotFoundError):
        main(["execute", "--profile", "smoke", "--root", str(missing)])


def test_no_warning_escapes_a_clean_start_up(env):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_environment() == []


@pytest.mark.parametrize(
    ("call", "error", "named"),
    [
        (lambda: release.available_steps(folder=5), TypeError, "folder must be a path"),
        (lambda: release.load_release(1, folder="", download=False), ValueError, "folder must be a path"),
        (lambda: data.load_stories(path=5), TypeError, "path must be a path"),
        (lambda: data.load_stories(max_stories=2.5), ValueError, "max_stories"),
        (lambda: data.load_stories(max_stories=0), ValueError, "max_stories"),
        (lambda: data.split_stories(5), TypeError, "text must be a str"),
        (lambda: data.data_fingerprint("one story"), TypeError, "stories must be a list of strings"),
        (lambda: data.data_fingerprint(["a", 5]), TypeError, "stories must hold only strings"),
        (lambda: cache.cached(5, {}, lambda: 1), TypeError, "namespace must be a str"),
        (lambda: cache.cached("t/x", {}, 5), TypeError, "compute must be a function"),
        (lambda: ExecuteConfig(profile="smoke", only="07_task"), TypeError, "only must be a tuple"),
        (lambda: ExecuteConfig(profile="smoke", knobs={"seed": 1}), TypeError, "knobs must be a tuple of tuple"),
        (lambda: ExecuteConfig(profile="smoke", cell_timeout=-1), ValueError, "cell_timeout"),
        (lambda: ExecuteConfig(profile="smoke", root="x"), TypeError, "root must be a Path, got str"),
    ],
)
def test_public_arguments_are_checked_by_name(env, call, error, named):
    with pytest.raises(error) as info:
        call()
    assert named in str(info.value) and "\n" not in str(info.value)


def test_arguments_accept_what_they_should(tmp_path):
    assert arguments.path_argument("~/x", "p") == Path.home() / "x"
    assert arguments.path_argument(tmp_path, "p") == tmp_path
    assert arguments.whole_number(3, "n") == 3 and arguments.whole_number(0, "n", minimum=0) == 0
    assert arguments.text_sequence(("a", "b"), "s") == ["a", "b"]
    for bad in (True, 1.0, -1, "3"):
        with pytest.raises(ValueError, match="n must be a whole number of at least 1"):
            arguments.whole_number(bad, "n")


def test_cache_import_of_a_missing_bundle_is_one_line(env, capsys):
    missing = env / "nowhere.tar"
    assert main(["cache", "import", str(missing)]) == 1
    _one_line_error(capsys, f"no bundle at {missing}", "cache export")


# --- the executor's cases of issue 31's campaign -------------------------------------------------


def _tiny_book(env, monkeypatch, needs: dict | None = None):
    """The two-chapter repository of test_execute, the command line pointed at it, and (when
    given) which of its chapters read TinyStories or the release."""
    import functools

    from test_execute import _tiny_repo

    (env / "repo").mkdir()
    repo = _tiny_repo(env / "repo")
    if needs is not None:
        (repo / "mechbook" / "book").mkdir(parents=True)
        (repo / "mechbook" / "book" / "pages.json").write_text(json.dumps({"needs": needs}))
    monkeypatch.setattr("mechbook.book.config.ExecuteConfig", functools.partial(ExecuteConfig, root=repo))
    return repo


def test_check_refuses_a_run_with_knobs_as_not_the_profile(env):
    import nbformat
    from test_execute import _tiny_repo

    from mechbook.book.checks import check_book
    from mechbook.book.run import write_atomic

    (env / "repo").mkdir()
    repo = _tiny_repo(env / "repo")
    cfg = ExecuteConfig(profile="smoke", root=repo, only=("01_ok",))
    nb = nbformat.read(repo / "book" / "p" / "01_ok.ipynb", as_version=4)
    nb.metadata["mechbook"] = {"status": "ok", "parameters": {"profile": "smoke", "n_per_pool": 20}}
    write_atomic(nb, cfg.out_dir / "book" / "p" / "01_ok.ipynb")
    problems = check_book(cfg)
    assert problems[0] == (
        "book/p/01_ok.ipynb: its last run had knobs (n_per_pool=20), so it is not the smoke profile and is not "
        "checked; run `python -m mechbook execute --profile smoke --only 01_ok` without --knob"
    )


def test_a_missing_input_stops_the_build_before_the_first_chapter_with_its_whole_advice(env, monkeypatch, capsys):
    from mechbook.assign_add import release

    repo = _tiny_book(env, monkeypatch, {"tinystories": ["02_bad"], "release": ["01_ok"]})
    monkeypatch.setenv("MECHBOOK_OFFLINE", "1")
    advice = "the released Assign-and-Add file model_state_dict.pth is not available: ... or set MECHBOOK_AA_RELEASE"

    def unavailable(step):
        raise release.ReleaseNotFound(advice + " to a copy (e.g. ../shared/data/assign-and-add-release)")

    monkeypatch.setattr(release, "release_path", unavailable)
    assert main(["execute", "--profile", "smoke", "--lanes", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("error: ") for line in err), err
    assert err[0].startswith("error: 02_bad cannot start: TinyStories")
    assert err[0].endswith("so it can be downloaded once into " + str(env / "cache" / "tinystories") + "."), err[0]
    assert err[1].startswith("error: 01_ok cannot start: the released") and err[1].endswith("assign-and-add-release)")
    assert not (repo / "_build" / "executed").exists(), "no chapter started"


def test_a_huge_folder_that_is_not_a_release_is_refused_unhashed(env, monkeypatch, capsys):
    from mechbook.book import environment

    repo = _tiny_book(env, monkeypatch)
    huge = env / "photos"
    (huge / "checkpoints").mkdir(parents=True)
    for i in range(2003):
        (huge / f"img_{i}.jpg").write_bytes(b"x")
    (huge / "checkpoints" / "checkpoint_step_latest.pth").write_bytes(b"x")
    monkeypatch.setenv("MECHBOOK_AA_RELEASE", str(huge))
    monkeypatch.setattr(environment, "sha256_file", lambda path: pytest.fail(f"hashed {path}"))
    assert main(["execute", "--profile", "smoke"]) == 1
    _one_line_error(capsys, f"MECHBOOK_AA_RELEASE={huge} holds no released file", "or unset it")
    assert not (repo / "_build" / "digests.json").exists()
    (huge / "checkpoints" / "checkpoint_step_101.pth").write_bytes(b"x")
    assert check_environment() == []
    assert environment.release_layout(huge) == ["checkpoint_step_101.pth"], "found by name, never read"


def test_ctrl_c_in_the_site_build_exits_130_with_the_interrupted_line(env, monkeypatch, capsys):
    import jupyter_book.sphinx

    _tiny_book(env, monkeypatch)
    monkeypatch.setattr("mechbook.book.run.execute_book", lambda cfg: [])
    monkeypatch.setattr(jupyter_book.sphinx, "build_sphinx", lambda *a, **k: KeyboardInterrupt())
    assert main(["build", "--profile", "smoke"]) == 130
    err = capsys.readouterr().err.strip()
    assert err.startswith("the site build was interrupted (Ctrl-C or a signal)") and "\n" not in err, err
