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
from test_injection_cut import EDITOR, UNRELATED

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
    page.goto(served.url + "/settings")
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
    page.goto(served.url + "/settings")
    expect(page.locator("#pinned-types")).to_be_hidden()
    page.click("#ambient summary")
    page.check("#f-ambient_enabled")
    expect(page.locator("#pinned-types")).to_be_visible()
    expect(page.locator("input[name=pinned_types]")).to_have_count(8)

    # an invalid value: refused inline, nothing written
    page.goto(served.url + "/settings")
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
    assert serious_violations(page) == []
    hit.click()
    expect(page.locator("#content")).to_have_text("The staging database is Postgres 16")
    shot(page, "memory.png")

    page.goto(served.url + "/sessions?id=chat-1")  # the old address: the session's page
    expect(page.locator("#turn")).to_contain_text("Turn 1")
    page.goto(served.url + "/dedup-log")
    expect(page.locator("#log")).to_contain_text("hash_exact")
    shot(page, "dedup-log.png")

    # forget from the page, after a confirmation: gone from search; one click restores it
    page.goto(served.url + "/memories?q=staging+Postgres")
    page.locator("#results a", has_text="Postgres 16").click()
    memory_url = page.url
    page.click("#forget")
    expect(page.locator("#confirm-forget")).to_be_visible()
    page.click("#forget-cancel")  # cancelled: nothing happens
    expect(page.locator("#m-status")).to_have_text("active")
    page.click("#forget")
    page.click("#forget-yes")
    expect(page.locator("#status")).to_contain_text("Forgotten")
    expect(page.locator("#m-status")).to_have_text("forgotten")
    shot(page, "memory-forgotten.png")
    assert serious_violations(page) == []
    page.goto(served.url + "/memories?q=staging+Postgres")
    expect(page.locator("#results")).not_to_contain_text("Postgres 16")
    expect(page.locator("#results")).to_contain_text("No memory found")
    page.goto(memory_url)
    page.click("#restore")
    expect(page.locator("#status")).to_contain_text("Restored")
    page.goto(served.url + "/memories?q=staging+Postgres")
    expect(page.locator("#results")).to_contain_text("Postgres 16")


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
    # the hash_exact row was confirmed when written; reversing it: the offered text is the kept
    # memory's own text (main's review since 2024d70: a refusal, reported, nothing written)
    exact = page.locator(f"#review-{by_decision['hash_exact']['id']}")
    expect(exact.locator(".review-status")).to_have_text("confirmed")
    expect(exact.locator("[data-action=confirm]")).to_have_count(0)
    exact.locator("[data-action=reverse]").click()
    expect(page.locator("#status")).to_contain_text("nothing to restore")
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


def serious_violations(page: Any) -> list[str]:
    """axe-core's serious and critical accessibility violations of the page (the axe-core
    build shipped in the axe-playwright-python wheel; nothing downloaded)."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [
        f"{v['id']} ({v['impact']}): {v['help']} -> {[n['target'] for n in v['nodes']][:3]}"
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def seed_store(url: str) -> None:
    """Two owners, an agent, a duplicate, a changed number and two sessions of alice."""
    with httpx.Client(base_url=url) as http:
        for owner, agent, content in (
            ("alice", None, "Alice works at Acme"),
            ("alice", "coder", "Alice prefers dark mode in her editor"),
            ("alice", None, "Alice works at Acme"),
            ("alice", None, "The weekly sync is at 3pm on Tuesdays"),
            ("alice", None, "The weekly sync is at 4pm on Tuesdays"),
            ("bob", None, "Bob lives in Lyon"),
        ):
            body = {"memory": {"content": content, "agent": agent}, "owner": owner}
            assert http.post("/v1/memories", json=body).status_code == 200
        for session, text in (("chat-1", "where does Alice work?"), ("chat-2", "sync time?")):
            for _ in range(2):  # the second turn skips what the first showed
                http.post("/v1/inject", json={"session": session, "text": text, "owner": "alice"})


def test_overview_answers_in_three_clicks(page: Any, served: Served) -> None:
    """From the overview: which owners and agents exist; what session X was shown at turn N and
    why an item was skipped; why a text was not stored. Each page passes axe."""
    expect = sync_api.expect
    seed_store(served.url)
    page.goto(served.url + "/?owner=alice")  # no owner: the rule's ([scope] owner, else default)
    expect(page.locator("#owners")).to_contain_text("alice")
    expect(page.locator("#owners")).to_contain_text("bob")
    expect(page.locator("#owners")).to_contain_text("coder 1")
    expect(page.locator("#pick-owner")).to_have_value("alice")
    assert serious_violations(page) == []
    shot(page, "overview.png")

    # 1. the agent's memories: one click on its count
    page.locator("#owners a", has_text="coder 1").click()
    expect(page.locator("#results")).to_contain_text("Alice prefers dark mode in her editor")
    expect(page.locator("#pick-agent")).to_have_value("coder")  # remembered in the URL
    assert "agent=coder" in page.url

    # 2. session chat-1, turn 2: what it was shown and why the rest was left out
    page.goto(served.url + "/?owner=alice")
    page.locator("#session-counts a", has_text="chat-1").click()
    turn2 = page.locator("#turn-2")
    expect(turn2).to_contain_text("shown within the last turns (re-injection delay)")
    expect(page.locator("#turn-1")).to_contain_text("Alice works at Acme")
    assert serious_violations(page) == []
    shot(page, "session.png")

    # 3. why a text was not stored: the decision chip, then the log row in words
    page.goto(served.url + "/?owner=alice")
    page.locator("#decisions a", has_text="hash_exact").click()
    expect(page.locator("#log")).to_contain_text("not stored: the same text")
    page.goto(served.url + "/dedup-log?owner=alice")
    expect(page.locator("#log del", has_text="3pm")).to_be_visible()
    expect(page.locator("#log ins", has_text="4pm")).to_be_visible()
    assert serious_violations(page) == []
    shot(page, "dedup-log.png")


#: A memory whose text is markup: the pages must show it as text, never run it.
HOSTILE = '<img src=x onerror="window.__pwned=1"> alice editor <script>window.__pwned=2</script>'


def test_session_explain_view_shows_each_candidates_legs_scores_and_rule(
    page: Any, served: Served
) -> None:
    """Issue #37, item 3: the session page explains an injection of a message: every candidate
    with its legs' ranks, cosine, BM25 and the rule that kept or cut it, in words; the
    candidates the session's window holds are marked; nothing is injected or recorded; a
    memory whose text is markup shows as text."""
    expect = sync_api.expect
    message = "set up the editor for alice"
    with httpx.Client(base_url=served.url) as http:
        for content in [*EDITOR, *UNRELATED[:8], HOSTILE]:  # her name in each of them
            body = {"memory": {"content": content}, "owner": "alice"}
            assert http.post("/v1/memories", json=body).status_code == 200
        shown = http.post(
            "/v1/inject", json={"session": "chat-9", "text": message, "owner": "alice"}
        )
        in_block = {item["memory"]["content"] for item in shown.json()["items"]}
    assert in_block

    page.goto(served.url + "/sessions/chat-9?owner=alice")
    expect(page.locator("#turn")).to_contain_text("Turn 1.")
    expect(page.locator("#explain")).to_have_count(0)  # no message yet: no table
    page.fill("#explain-text", message)
    page.click("#explain-go")
    rows = page.locator("#explain tbody tr")
    expect(rows.first).to_be_visible()
    n = rows.count()
    kept = page.locator("#explain tbody tr.kept").count()
    cut = page.locator("#explain tbody tr.cut").count()
    assert kept >= 1 and cut >= 1 and kept + cut == n, (kept, cut, n)
    expect(page.locator("#explain-summary")).to_have_text(f"{n} candidates; {kept} passed the cut.")
    for i in range(n):
        row = rows.nth(i)
        cells = row.locator("td")
        verdict = cells.nth(4).inner_text()
        assert row.locator(".rule").inner_text().startswith(f"{verdict}: ")
        assert "vector #" in cells.nth(1).inner_text() or "full-text #" in cells.nth(1).inner_text()
        float(cells.nth(2).inner_text())  # the cosine, a number
        text = cells.nth(0).locator("a").inner_text()
        # what the session was shown at turn 1 is in its window: marked
        assert ("shown within the window" in cells.nth(0).inner_text()) == (text in in_block)
    # the cut's own words: alice is in every memory, so her name alone carries nothing
    expect(page.locator("#explain")).to_contain_text("cut: ")
    # hostile text: shown as text, never run, no element made of it
    expect(page.locator("#explain")).to_contain_text("<script>window.__pwned=2</script>")
    assert page.evaluate("window.__pwned") is None
    expect(page.locator("#explain img")).to_have_count(0)
    expect(page.locator("#explain script")).to_have_count(0)
    assert "explain=" in page.url  # the view is an address: it can be shared and reloaded
    # nothing was injected or recorded by explaining
    expect(page.locator("#turn")).to_contain_text("Turn 1.")
    expect(page.locator("#turns tbody tr")).to_have_count(1)
    assert serious_violations(page) == []
    shot(page, "session-explain.png")


def test_pickers_lists_and_not_found(page: Any, served: Served) -> None:
    expect = sync_api.expect
    seed_store(served.url)
    page.goto(served.url + "/memories")
    page.select_option("#pick-owner", "bob")  # applies at once, kept in the URL
    page.wait_for_url("**/memories?owner=bob*")
    expect(page.locator("#results")).to_contain_text("Bob lives in Lyon")
    expect(page.locator("#count")).to_have_text("1 active memory")
    page.click("nav >> text=Sessions")
    assert "owner=bob" in page.url  # the nav keeps the owner
    page.select_option("#pick-owner", "alice")
    expect(page.locator("#sessions tbody tr")).to_have_count(2)
    expect(page.locator("#sessions tbody tr").first).to_contain_text("chat-2")  # recent first
    assert serious_violations(page) == []
    shot(page, "sessions.png")
    page.goto(served.url + "/memories?owner=alice&sort=text")
    expect(page.locator("#count")).to_contain_text("active memories")
    assert serious_violations(page) == []
    shot(page, "memories-list.png")

    page.goto(served.url + "/sessions/never-seen?owner=alice")
    expect(page.locator("#error-title")).to_have_text("Not found")
    expect(page.locator("#error-detail")).to_contain_text("never-seen")
    page.goto(served.url + "/no/such/page")
    expect(page.locator("#error-detail")).to_contain_text("No page at /no/such/page")
    assert serious_violations(page) == []
    shot(page, "not-found.png")
    icon = page.request.get(served.url + "/favicon.ico")
    assert icon.ok and icon.headers["content-type"] == "image/svg+xml"


def test_agent_page_default_beside_override_and_field_revert(
    page: Any, served: Served, store_backend: Backend
) -> None:
    expect = sync_api.expect
    toml = store_backend.home / "memlane.toml"
    page.goto(served.url + "/settings")
    # the agent-name pattern is valid under Chromium's v flag (an invalid one never matches)
    page.fill("#agent-name", "coder")
    assert page.eval_on_selector("#agent-name", "el => el.validity.valid")
    page.fill("#agent-name", "bad name")
    assert not page.eval_on_selector("#agent-name", "el => el.validity.valid")
    assert serious_violations(page) == []
    page.goto(served.url + "/agents/coder")
    page.fill("#f-max_total", "3")
    page.fill("#f-search_limit", "7")
    page.click("#save")
    page.wait_for_url("**/agents/coder?saved=1")
    expect(page.locator("#status")).to_have_text("Saved.")  # said after the reload too
    expect(page.locator("#d-max_total")).to_have_text(
        page.eval_on_selector(
            "#settings-form", "f => String(JSON.parse(f.dataset.defaults).max_total)"
        )
    )
    assert serious_violations(page) == []
    shot(page, "agent-override.png")
    page.click("button.revert-field[data-key=max_total]")
    page.wait_for_url("**/agents/coder?saved=1")
    expect(page.locator("#d-max_total")).to_have_count(0)
    assert tomllib.loads(toml.read_text())["agents"]["coder"]["injection"] == {"search_limit": 7}


def test_api_reference_renders_the_31_document(page: Any, served: Served) -> None:
    expect = sync_api.expect
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(served.url + "/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("OAS 3.1")
    expect(page.locator(".opblock-summary-path", has_text="/v1/inject").first).to_be_visible()
    expect(page.locator(".swagger-ui")).not_to_contain_text("Unable to render this definition")
    assert all(u.startswith(served.url) for u in requests), requests  # nothing from a CDN
    shot(page, "api.png")
