"""`make pdf` on the smoke site: one PDF with every page of the book in order, a contents page
naming each with its first page, every page numbered, an outline, and every chart drawn (the
builder refuses a page whose charts did not draw); the chapter pages then link to it."""

from __future__ import annotations

import re
import shutil

import pytest

from mechbook.book.pdf import PDF_LINK, PDF_NAME, build_pdf, link_pages, site_pages, site_profile

pytestmark = pytest.mark.book


@pytest.fixture(scope="module")
def printed(built_site, tmp_path_factory):
    out = tmp_path_factory.mktemp("pdf") / PDF_NAME
    return out, build_pdf(built_site, out, "The book executed in the smoke profile")


def test_every_page_of_the_book_is_printed_in_order_with_its_charts(built_site, printed):
    from pypdf import PdfReader

    out, pages = printed
    held, lacking = site_pages(built_site)
    assert not lacking and [p.path for p in pages] == held
    assert sum(p.charts for p in pages) >= 20, "the smoke book draws dozens of charts"
    reader = PdfReader(out)
    assert len(reader.pages) > sum(p.pages for p in pages), "a contents page, then the book's"
    outline = [item.title for item in reader.outline]
    assert outline == [p.title for p in pages]
    assert any(t.startswith("2. Leading terms") for t in outline) and any("Assign" in t for t in outline)


def test_the_contents_name_each_page_with_its_first_page_and_every_page_is_numbered(printed):
    from pypdf import PdfReader

    out, pages = printed
    reader = PdfReader(out)
    contents = reader.pages[0].extract_text()
    assert "Contents" in contents and "smoke profile" in contents
    first = len(reader.pages) - sum(p.pages for p in pages) + 1
    for page in pages:
        assert re.search(re.escape(page.title[:30]) + rf"[^\n]*\n?\s*{first}\b", contents), (page.title, first)
        text = reader.pages[first - 1].extract_text()
        assert re.search(rf"(^|\n)\s*{first}\s*($|\n)", text), f"page {first} ({page.title}) shows no number"
        first += page.pages


def test_chapter_pages_link_to_the_pdf(built_site, tmp_path):
    site = tmp_path / "site"
    (site / "book" / "part1").mkdir(parents=True)
    page = next((built_site / "book" / "part1").glob("0*.html"))
    shutil.copy(page, site / "book" / "part1" / page.name)
    assert PDF_LINK in page.read_text(encoding="utf-8")
    assert site_profile(site) == "smoke"
    assert link_pages(site) == 1
    assert link_pages(site) == 1, "a second run counts the page it linked before"
    text = (site / "book" / "part1" / page.name).read_text(encoding="utf-8")
    assert f'href="../../_downloads/{PDF_NAME}"' in text and PDF_LINK not in text


def test_no_site_says_what_to_run(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"run `make book` \(any PROFILE\) first, then `make pdf`"):
        build_pdf(tmp_path, tmp_path / "x.pdf", "x")
