"""What the web pages compute beyond the engine's answers: the store at a glance (owners, agents,
counts), decisions and skip reasons in words, the changed words of two texts, dates without
microseconds, paging. Pure functions over engine results; :mod:`memlane.server.pages` renders.
"""

from __future__ import annotations

import difflib
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from markupsafe import Markup, escape

from memlane.explain import DECISION_WORDS, SKIP_WORDS

#: Rows a list page shows at a time.
PAGE_SIZE = 50


def decision_words(decision: str) -> str:
    return DECISION_WORDS.get(decision, decision)


def skip_words(reason: str) -> str:
    return SKIP_WORDS.get(reason, reason.replace("_", " "))


def local_time(value: datetime | str | None) -> Markup:
    """``<time>`` with the UTC instant in ``datetime`` and ``YYYY-MM-DD HH:MM UTC`` as text;
    memlane.js rewrites the text in the browser's time zone. No microseconds either way."""
    if value is None or value == "":
        return Markup('<span class="empty">never</span>')
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    iso = moment.isoformat(timespec="seconds")
    return Markup('<time datetime="{}">{} UTC</time>').format(
        iso, moment.strftime("%Y-%m-%d %H:%M")
    )


def changed_words(old: str, new: str) -> tuple[Markup, Markup]:
    """``old`` and ``new`` as HTML with the words only one of them has in ``<del>`` / ``<ins>``
    (a word-level :class:`difflib.SequenceMatcher` diff; the rest escaped as is)."""
    a, b = re.findall(r"\S+|\s+", old), re.findall(r"\S+|\s+", new)
    left: list[str] = []
    right: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        old_part, new_part = escape("".join(a[i1:i2])), escape("".join(b[j1:j2]))
        if op == "equal":
            left.append(old_part)
            right.append(new_part)
            continue
        if old_part.strip():
            left.append(Markup("<del>{}</del>").format(old_part))
        else:
            left.append(old_part)
        if new_part.strip():
            right.append(Markup("<ins>{}</ins>").format(new_part))
        else:
            right.append(new_part)
    return Markup("".join(left)), Markup("".join(right))


def overview(
    counts: Iterable[tuple[str, str, str, int]], agents: Iterable[tuple[str, str | None, int]]
) -> list[dict[str, Any]]:
    """One entry per owner, most memories first: ``owner``, ``active``, ``types`` and
    ``statuses`` (name -> count) and ``agents`` (name -> active count; ``""`` shared)."""
    owners: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"types": Counter(), "statuses": Counter(), "agents": {}, "active": 0}
    )
    for owner, mtype, status, n in counts:
        entry = owners[owner]
        entry["statuses"][status] += n
        if status == "active":
            entry["types"][mtype] += n
            entry["active"] += n
    for owner, agent, n in agents:
        owners[owner]["agents"][agent or ""] = n
    rows = [{"owner": name, **entry} for name, entry in owners.items()]
    return sorted(rows, key=lambda r: (-r["active"], r["owner"]))


def decisions_by_day(entries: Iterable[Any]) -> list[tuple[str, Counter[str]]]:
    """Dedup-log entries counted per UTC day and decision, newest day first."""
    days: dict[str, Counter[str]] = defaultdict(Counter)
    for e in entries:
        days[e.created_at.strftime("%Y-%m-%d")][e.decision.value] += 1
    return sorted(days.items(), reverse=True)


def config_source(home: str) -> dict[str, Any]:
    """Where the settings come from: the home's memlane.toml (if any) and the ``MEMLANE_*``
    variables set (names only: a value may be a secret)."""
    toml = os.path.join(home, "memlane.toml")
    return {
        "home": home,
        "toml": toml if os.path.exists(toml) else None,
        "env": sorted(k for k in os.environ if k.startswith("MEMLANE_")),
    }


def page_of(rows: Sequence[Any], page: int) -> tuple[Sequence[Any], int, int]:
    """Rows of page ``page`` (1-based, clamped), that page, and the number of pages."""
    pages = max(1, -(-len(rows) // PAGE_SIZE))
    page = min(max(page, 1), pages)
    return rows[(page - 1) * PAGE_SIZE : page * PAGE_SIZE], page, pages


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "bytes" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{n} bytes"


#: How the explain view names a search leg.
LEG_NAMES = {"vector": "vector", "fts": "full-text", "neighbour": "neighbour", "graph": "graph"}


def legs_text(ranks: Mapping[str, int]) -> str:
    """A candidate's legs with its rank in each (``{"vector": 2, "fts": 5}`` -> ``"vector #2,
    full-text #5"``) for the sessions page's explain view."""
    return ", ".join(f"{LEG_NAMES.get(leg, leg)} #{rank}" for leg, rank in ranks.items())
