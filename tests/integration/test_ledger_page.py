"""The ledger page (mechbook.book.ledger) built into a site: it builds and links to its sections."""

from __future__ import annotations

import pytest
import test_ledger

from mechbook.book.config import ExecuteConfig

repo = test_ledger.repo  # the fixture of test_ledger.py


@pytest.mark.book
def test_the_ledger_page_builds_and_links_to_its_sections(repo, root):
    """Sphinx (warnings are errors) resolves the rows' {ref} and {doc} links."""
    from mechbook.book.site import build_site

    (repo / "_config.yml").write_text((root / "_config.yml").read_text())
    html = (build_site(ExecuteConfig(profile="smoke", root=repo)) / "book" / "appendix" / "ledger.html").read_text()
    assert 'href="../p2/08_fake.html#ch08-jump"' in html
    assert 'href="../p2/08_fake.html"' in html and 'href="../p1/01_fake.html"' in html
    assert "<table" in html and html.count("untested: ") == 2
