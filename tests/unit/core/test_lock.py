"""The Python environment is the lock's: on the platform the lock was resolved for, every package
``requirements.lock`` names is installed at that version (the first that differs is named); the
lock keeps every pin of ``requirements.txt``, and it pins every line exactly."""

import importlib.metadata
import platform
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def pins(path: Path) -> dict[str, str]:
    """{normalised name: version} of a file of ``name==version`` lines (comments and blanks skipped);
    any other line is refused, naming it."""
    out = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s=;]+)", line)
        if not match:
            raise ValueError(f"{path.name}:{number}: {raw!r} is not an exact name==version pin")
        out[re.sub(r"[-_.]+", "-", match[1]).lower()] = match[2]
    return out


def test_the_installed_environment_is_the_lock():
    here = f"# platform: {platform.system()}-{platform.machine()} CPython {sys.version_info[0]}.{sys.version_info[1]}"
    stated = (ROOT / "requirements.lock").read_text().splitlines()[1]
    assert stated.startswith("# platform: "), "the lock's second line names the platform it was resolved for"
    if stated != here:
        pytest.skip(f"the lock was resolved for {stated[12:]}; `make venv` installs requirements.txt's pins here")
    for name, version in pins(ROOT / "requirements.lock").items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        assert installed == version, (
            f"requirements.lock names {name}=={version}, this environment has {installed or 'none'}: run `make venv`"
        )


def test_the_lock_keeps_every_pin_of_requirements_txt():
    lock = pins(ROOT / "requirements.lock")
    for name, version in pins(ROOT / "requirements.txt").items():
        # a local version (torch's +cpu) is the release it labels
        assert lock.get(name, "").split("+")[0] == version, (
            f"requirements.txt pins {name}=={version}, the lock has {lock.get(name)}: run `make lock`"
        )


def test_a_line_that_is_not_an_exact_pin_is_refused(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("# comment\nPyYAML==6.0.4\n\ntorch==2.13.0+cpu  # the CPU build\n")
    assert pins(good) == {"pyyaml": "6.0.4", "torch": "2.13.0+cpu"}
    for line in ("numpy>=2", "numpy", "-e .", "numpy==2 ; python_version<'3'"):
        bad = tmp_path / "bad.txt"
        bad.write_text(f"PyYAML==6.0.4\n{line}\n")
        with pytest.raises(ValueError, match=r"bad.txt:2: .* is not an exact name==version pin"):
            pins(bad)
