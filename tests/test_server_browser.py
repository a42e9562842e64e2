"""The web pages in a real browser: the real `memlane serve` in a subprocess, driven by
Playwright in headless Chromium (the Debian ``chromium`` package, through ``executable_path``:
browser downloads are not reachable here; ``.ci/run`` installs it). Screenshots of each page go
to docs/img/."""

from __future__ import annotations

import os
import shutil
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import REPO, Backend
from server_support import Served, run_server

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip(
        "the Debian chromium package is not installed (.ci/run installs it)",
        allow_module_level=True,
    )

#: Screenshots go to docs/img/ with UPDATE_SCREENSHOTS=1 (to refresh the docs), else to a
#: temporary folder (the pages are still rendered and captured, the checkout stays clean).
IMG = REPO / "docs" / "img"
COMMENTED = "# operator notes: keep me\n[injection]\n# how many hits\nsearch_limit = 20\n"


@pytest.fixture
def served(store_backend: Backend) -> Iterator[Served]:
    (store_backend.home / "memlane.toml").write_text(COMMENTED)
    with run_server(store_backend) as served:
        assert served.proc.poll() is None, "memlane serve exited at start"
        yield served


@pytest.fixture
def page(served: Served) -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.set_default_timeout(15_000)
            yield page
        finally:
            browser.close()


def shot(page: Any, name: str) -> None:
    folder = IMG if os.environ.get("UPDATE_SCREENSHOTS") == "1" else Path(tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / name), full_page=True)
    assert (folder / name).stat().st_size > 0


def test_settings_flows(page: Any, served: Served, store_backend: Backend) -> None:
    expect = sync_api.expect
    toml = store_backend.home / "memlane.toml"
    page.goto(served.url + "/")
    shot(page, "settings.png")

    # the global semantic threshold: the file changes, its comments survive, the server uses it
    page.fill("#f-semantic_threshold", "0.9")
    page.click("#save")
    expect(page.locator("#status")).to_have_text("Saved.")
    text = toml.read_text()
    assert "# operator notes: keep me" in text and "# how many hits" in text
    # only the changed value is written: the untouched ones stay unset (a model switch still
    # moves the profile-derived defaults)
    assert tomllib.loads(text)["injection"] == {"search_limit": 20, "semantic_threshold": 0.9}
    current = httpx.get(served.url + "/v1/settings/injection").json()["settings"]
    assert current["semantic_threshold"] == 0.9

    # ambient awareness: collapsed; its type checkboxes appear when it is switched on
    page.goto(served.url + "/")
    expect(page.locator("#pinned-types")).to_be_hidden()
    page.click("#ambient summary")
    page.check("#f-ambient_enabled")
    expect(page.locator("#pinned-types")).to_be_visible()
    expect(page.locator("input[name=pinned_types]")).to_have_count(8)

    # an invalid value: refused inline, nothing written
    page.goto(served.url + "/")
    before = toml.read_text()
    page.fill("#f-search_limit", "0")
    page.click("#save")
    expect(page.locator("#err-search_limit")).not_to_be_empty()
    expect(page.locator("#status")).to_contain_text("Not saved")
    assert toml.read_text() == before

    # an agent override: badge "Override", then revert: "Using default", section gone
    page.goto(served.url + "/agents/coder")
    expect(page.locator("#badge")).to_have_text("Using default")
    page.fill("#f-max_total", "3")
    page.click("#save")
    expect(page.locator("#badge")).to_have_text("Override")
    assert tomllib.loads(toml.read_text())["agents"]["coder"]["injection"] == {"max_total": 3}
    shot(page, "agent-override.png")
    page.click("#revert")
    expect(page.locator("#badge")).to_have_text("Using default")
    assert "agents" not in tomllib.loads(toml.read_text())
    assert "# operator notes: keep me" in toml.read_text()


def test_memory_flows(page: Any, served: Served) -> None:
    expect = sync_api.expect
    with httpx.Client(base_url=served.url) as http:
        for content in ("The staging database is Postgres 16", "The office is in Lyon"):
            http.post("/v1/memories", json={"memory": {"content": content}})
        http.post("/v1/memories", json={"memory": {"content": "The office is in Lyon"}})
        http.post("/v1/inject", json={"session": "chat-1", "text": "staging database Postgres?"})

    page.goto(served.url + "/memories")
    page.fill("#q", "staging Postgres")
    page.click("#search-form button")
    hit = page.locator("#results a", has_text="The staging database is Postgres 16")
    expect(hit).to_be_visible()
    shot(page, "memories.png")
    hit.click()
    expect(page.locator("#content")).to_have_text("The staging database is Postgres 16")
    shot(page, "memory.png")

    page.goto(served.url + "/sessions?id=chat-1")
    expect(page.locator("#turn")).to_contain_text("Turn 1")
    shot(page, "sessions.png")
    page.goto(served.url + "/dedup-log")
    expect(page.locator("#log")).to_contain_text("hash_exact")
    shot(page, "dedup-log.png")

    # forget from the page: gone from search
    page.goto(served.url + "/memories?q=staging+Postgres")
    page.locator("#results a", has_text="Postgres 16").click()
    page.click("#forget")
    page.wait_for_url("**/memories?owner=default")
    page.goto(served.url + "/memories?q=staging+Postgres")
    expect(page.locator("#results")).not_to_contain_text("Postgres 16")
    expect(page.locator("#results")).to_contain_text("No memory found")


def test_dedup_log_review_buttons(page: Any, served: Served) -> None:
    """Confirm and reverse from the dedup-log page: the row's status changes in place, a reversed
    text is a memory again, and a text that is still live is reported with nothing written."""
    expect = sync_api.expect
    base = "The staging database runs on a large Postgres cluster in Frankfurt"
    spaced = base.replace("database", "data base")  # a compound variant: auto_reject
    with httpx.Client(base_url=served.url) as http:
        for text in (base, base + " ", spaced):
            http.post("/v1/memories", json={"memory": {"content": text}})
        rows = http.get("/v1/dedup-log").json()["items"]
    by_decision = {r["decision"]: r for r in rows}
    assert set(by_decision) == {"hash_exact", "auto_reject"}, rows
    page.goto(served.url + "/dedup-log")
    # the hash_exact row was confirmed when written; reversing it: its text is live -> reported
    exact = page.locator(f"#review-{by_decision['hash_exact']['id']}")
    expect(exact.locator(".review-status")).to_have_text("confirmed")
    expect(exact.locator("[data-action=confirm]")).to_have_count(0)
    exact.locator("[data-action=reverse]").click()
    expect(page.locator("#status")).to_contain_text("nothing written")
    # the auto_reject row: confirm, then change our mind and reverse it
    cell = page.locator(f"#review-{by_decision['auto_reject']['id']}")
    expect(cell.locator(".review-status")).to_have_text("unreviewed")
    shot(page, "dedup-log-review.png")
    cell.locator("[data-action=confirm]").click()
    expect(cell.locator(".review-status")).to_have_text("confirmed")
    expect(cell.locator("[data-action=confirm]")).to_have_count(0)
    cell.locator("[data-action=reverse]").click()
    expect(cell.locator(".review-status")).to_have_text("reversed")
    expect(cell.locator("button")).to_have_count(0)
    expect(page.locator("#status")).to_contain_text("reversed")
    with httpx.Client(base_url=served.url) as http:
        assert http.get("/v1/dedup-log/unreviewed").json() == []
        memories = http.get("/v1/memories").json()["items"]
    assert sorted(m["content"] for m in memories) == sorted([base, spaced])
