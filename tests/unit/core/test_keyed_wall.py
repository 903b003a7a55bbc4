"""The wall between cached computation and the page: no part's claims or readings module is ever
part of a cached result's key (an edit to a claim or a sentence must never retrain a model)."""

from mechbook.cache import keyed_modules, package_root


def test_no_claims_or_readings_module_is_keyed():
    root = package_root()
    walled = sorted(
        ".".join(p.relative_to(root).with_suffix("").parts)
        for p in (root / "mechbook").rglob("*.py")
        if p.stem in ("claims", "readings", "tables", "findings")
    )
    assert {
        "mechbook.claims",
        "mechbook.leading_terms.claims",
        "mechbook.leading_terms.readings",
        "mechbook.pythia.readings",
        "mechbook.assign_add.claims",
        "mechbook.assign_add.readings",
    } <= set(walled)
    assert not set(walled) & set(keyed_modules())
