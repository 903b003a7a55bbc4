"""DEVELOPING.md's layout names every module of the package (a new module without a line there
fails here), and the README stays a guide: under 200 lines."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_layout_names_every_module():
    text = (ROOT / "DEVELOPING.md").read_text(encoding="utf-8")
    layout = text[text.index("## Layout") : text.index("## Chapter conventions")]
    package = ROOT / "mechbook"
    missing = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        name = rel.split("/")[-1]
        chapter = rel.startswith("chapters/ch")  # listed as a range: ch01_corpus_maps.py ... ch11_how_much_data.py
        named = f" {rel} " in layout or (f"{rel.split('/')[0]}/" in layout and f" {name} " in layout)
        if not (named or chapter):
            missing.append(rel)
    assert not missing, f"DEVELOPING.md's layout does not name: {missing}"


def test_the_readme_is_a_guide_not_a_diary():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) < 200
