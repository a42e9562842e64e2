"""Secrets and private text never stored (issue #24, docs/security.md).

Two filters run on every text before it is stored or sent to an LLM (the write path's
:meth:`~memlane.dedup.write.WritePath.validate`, so ``add``, import, ``learn`` and the hooks;
and the transcript ``learn`` sends to the model):

- :func:`strip_private`: spans inside ``<private>...</private>`` are removed (tags matched
  case-insensitively; an unclosed ``<private>`` hides the rest of the text);
- :func:`find_secrets`: well-known secret formats, each a :class:`Rule` below. The decision is
  ``[privacy] secrets``: ``"redact"`` (default: each secret becomes ``[redacted:<kind>]`` and the
  memory is stored) or ``"refuse"`` (the memory is refused with 422 / exit 3 naming the kind).

Why not ``detect-secrets`` (Yelp, PyPI)? It was tried on the labelled set of
``tests/data/secrets.tsv``: its default plugins are made for source code, and its
high-entropy plugins flag UUIDs, commit hashes and checksums in prose (every look-alike line
holding one), while its keyword plugin needs code syntax. A rule set of formats whose vendors
document a fixed prefix or shape (AWS ``AKIA``, GitHub ``ghp_``, Slack ``xox*``, JWT ``eyJ``,
PEM blocks, ...) plus keyword assignments whose value looks random is both more precise and
explains itself. ``memlane bench secrets`` prints its recall and precision on that set.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from memlane.errors import InvalidMemory

SecretsDecision = Literal["redact", "refuse"]


class PrivacySettings(BaseModel):
    """``[privacy]``: what the write path does with a secret in a memory (docs/security.md).
    ``<private>...</private>`` spans are always removed."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    #: ``"redact"``: each secret becomes ``[redacted:<kind>]`` and the memory is stored;
    #: ``"refuse"``: the memory is refused (422 / exit 3) naming the kind of secret.
    secrets: SecretsDecision = "redact"


_PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", re.IGNORECASE | re.DOTALL)
#: Words that mark a documentation example or a placeholder, not a real value.
_PLACEHOLDER = re.compile(
    r"example|sample|dummy|placeholder|your[_-]?|changeme|redacted|xxxx|\*\*\*|<[^>]*>|\$\{|"
    r"\{\{|%\(|os\.environ|getenv|process\.env|env\(|\.\.\.|^[A-Za-z_][\w.]*\(|^\$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Finding:
    """One secret in a text: its kind and where (``text[start:end]`` is the secret)."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Rule:
    """A secret format: ``pattern``'s group ``s`` (or the whole match) is the secret; ``check``
    (when given) must accept it."""

    kind: str
    pattern: re.Pattern[str]
    check: Callable[[str], bool] | None = None


def entropy_bits(value: str) -> float:
    """Shannon entropy of ``value``'s characters, in bits per character."""
    if not value:
        return 0.0
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _real(value: str) -> bool:
    """Not a placeholder, not one repeated character."""
    return not _PLACEHOLDER.search(value) and len(set(value)) > 3


def _random(value: str) -> bool:
    """Looks generated: real, at least 3 bits of entropy a character, not a dotted name
    (``settings.API_KEY``), and with digits, or both cases over 16 characters (words,
    ``True`` and ``None`` are not secrets)."""
    if not _real(value) or entropy_bits(value) < 3.0 or _NAME.fullmatch(value):
        return False
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
    return any(c.isdigit() for c in value) or (mixed and len(value) >= 16)


_NAME = re.compile(r"[A-Za-z_][A-Za-z_.\[\]'\"-]*")


def _password(value: str) -> bool:
    """A password given in a sentence or an assignment: real, 6+ characters, not only letters
    (``hunter2`` is one, ``correct`` is a word)."""
    return _real(value) and len(value) >= 6 and not value.isalpha()


def _rule(kind: str, pattern: str, check: Callable[[str], bool] | None = _real) -> Rule:
    return Rule(kind, re.compile(pattern), check)


_KEYWORD = (
    r"(?:[A-Za-z0-9_]*(?:api[_-]?key|secret[_-]?key|access[_-]?key|private[_-]?key|auth[_-]?token|"
    r"access[_-]?token|refresh[_-]?token|client[_-]?secret|_key|_token|_secret)|"
    r"password|passwd|pwd|secret|token|apikey|api_key)"
)

#: The rule set: (kind, pattern, check). Sources: each vendor's documented token format.
RULES: tuple[Rule, ...] = (
    _rule(
        "private_key",
        r"-----BEGIN (?:[A-Z]+ )*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END (?:[A-Z]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        None,
    ),
    _rule("aws_access_key_id", r"\b(?P<s>(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16})\b"),
    _rule(
        "aws_secret_access_key",
        r"(?i:aws_?secret_?(?:access_?)?key)\W{0,4}(?P<s>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
    ),
    _rule("github_token", r"\b(?P<s>gh[pousr]_[A-Za-z0-9]{36,255})\b"),
    _rule("github_fine_grained_pat", r"\b(?P<s>github_pat_[A-Za-z0-9_]{60,255})\b"),
    _rule("gitlab_token", r"\b(?P<s>glpat-[A-Za-z0-9_-]{20,})"),
    _rule("slack_token", r"\b(?P<s>xox[abposre]-[A-Za-z0-9-]{10,})"),
    _rule(
        "slack_webhook",
        r"(?P<s>https://hooks\.slack\.com/services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{16,})",
    ),
    _rule("anthropic_key", r"\b(?P<s>sk-ant-[A-Za-z0-9_-]{20,})"),
    _rule("openai_key", r"\b(?P<s>sk-(?!ant-)(?:proj-|svcacct-)?[A-Za-z0-9_-]{32,})"),
    _rule("stripe_key", r"\b(?P<s>(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,})"),
    _rule("google_api_key", r"\b(?P<s>AIza[0-9A-Za-z_-]{35})"),
    _rule("sendgrid_key", r"\b(?P<s>SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64})"),
    _rule("npm_token", r"\b(?P<s>npm_[A-Za-z0-9]{36})\b"),
    _rule("pypi_token", r"\b(?P<s>pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{40,})"),
    _rule("huggingface_token", r"\b(?P<s>hf_[A-Za-z]{34})\b"),
    _rule("jwt", r"\b(?P<s>eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"),
    _rule(
        "azure_storage_key",
        r"(?i:AccountKey|SharedAccessKey)=(?P<s>[A-Za-z0-9+/]{40,}={0,2})",
    ),
    _rule(
        "url_password",
        r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s/:@]{1,64}:(?P<s>[^\s/@]{3,128})@[\w.-]+",
        _password,
    ),
    _rule(
        "bearer_token",
        r"(?i:authorization:\s*bearer|bearer)\s+(?P<s>[A-Za-z0-9._~+/-]{20,}=*)",
        _random,
    ),
    _rule(
        "assigned_secret",
        r"(?i:\b" + _KEYWORD + r")[\"']?\s*(?::=|=>|[:=])\s*[\"']?(?P<s>[^\s\"'`,;]{8,200})",
        _random,
    ),
    _rule(
        "password",
        r"(?i:\b(?:[a-z0-9]+_)?(?:password|passphrase|passcode|passwd|pwd)\b"
        r"(?:\s+(?:is|was)\s+|\s*[:=]\s*))[\"'`]?(?P<s>[^\s\"'`,;]{6,64})",
        _password,
    ),
)


_PRIVATE_SPAN = re.compile(r"([ \t]*)" + _PRIVATE.pattern + r"([ \t]*)", _PRIVATE.flags)


def _close_gap(match: re.Match[str]) -> str:
    """What replaces a ``<private>`` span and the blanks around it: one space between two
    words ("lives at <private>x</private> in Bern" -> "lives at in Bern"), nothing at either
    end of the text or before punctuation ("at <private>x</private>." -> "at.")."""
    text, start, end = match.string, match.start(), match.end()
    if start == 0 or end == len(text) or text[end] in ".,;:!?)]}\n":
        return ""
    return " " if match.group(1) or match.group(2) else ""


def strip_private(text: str) -> str:
    """``text`` without its ``<private>...</private>`` spans (an unclosed tag: to the end); the
    blanks around a span close up to one space (never a double space where it was)."""
    if "<" not in text:
        return text
    return _PRIVATE_SPAN.sub(_close_gap, text)


def find_secrets(text: str, rules: tuple[Rule, ...] = RULES) -> list[Finding]:
    """The secrets in ``text``, by position, overlaps merged into the first (longest) one."""
    found: list[Finding] = []
    for rule in rules:
        for match in rule.pattern.finditer(text):
            group = "s" if "s" in rule.pattern.groupindex else 0
            value = match.group(group)
            if rule.check is not None and not rule.check(value):
                continue
            found.append(Finding(rule.kind, match.start(group), match.end(group)))
    found.sort(key=lambda f: (f.start, -(f.end - f.start)))
    merged: list[Finding] = []
    for f in found:
        if merged and f.start < merged[-1].end:
            continue
        merged.append(f)
    return merged


def redact(text: str, findings: list[Finding]) -> str:
    """``text`` with each finding replaced by ``[redacted:<kind>]``."""
    out, at = [], 0
    for f in findings:
        out.append(text[at : f.start])
        out.append(f"[redacted:{f.kind}]")
        at = f.end
    out.append(text[at:])
    return "".join(out)


def clean(text: str, decision: SecretsDecision, *, what: str = "content") -> tuple[str, list[str]]:
    """``text`` as it may be stored: private spans removed, then secrets redacted (or refused);
    returns the text and the kinds redacted.

    Raises:
        InvalidMemory: ``decision`` is ``"refuse"`` and ``text`` holds a secret (the message names
            its kind and position, never the secret).
    """
    text = strip_private(text)
    findings = find_secrets(text)
    if not findings:
        return text, []
    kinds = [f.kind for f in findings]
    if decision == "refuse":
        first = findings[0]
        raise InvalidMemory(
            f"{what} holds a secret ({first.kind} at character {first.start}"
            + (f", and {len(findings) - 1} more" if len(findings) > 1 else "")
            + '): refused by [privacy] secrets = "refuse"; remove it, or keep secrets in a '
            "password manager"
        )
    return redact(text, findings), kinds


def clean_metadata(metadata: dict[str, Any], decision: SecretsDecision) -> dict[str, Any]:
    """``metadata`` (JSON values) with :func:`clean` applied to every string in it, keys
    included (two keys that clean to the same text: the later one's value is kept).
    Raises :class:`InvalidMemory` as :func:`clean`."""

    def key(name: str, where: str) -> str:
        what = f"metadata key at {where}" if where else "metadata key"
        return clean(name, decision, what=what)[0] if isinstance(name, str) else name

    def walk(value: Any, where: str) -> Any:
        if isinstance(value, str):
            return clean(value, decision, what=f"metadata value at {where}")[0]
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for k, v in value.items():
                name = key(k, where)
                out[name] = walk(v, f"{where}.{name}" if where else name)
            return out
        if isinstance(value, list):
            return [walk(v, f"{where}[{n}]") for n, v in enumerate(value)]
        return value

    result: dict[str, Any] = walk(metadata, "")
    return result


def clean_name(value: str) -> str:
    """A name that is stored (a session id, an agent, a project identity, a memory's source):
    without its ``<private>`` spans, each secret replaced by ``[redacted:<kind>]`` whatever
    ``[privacy] secrets`` says (a name is not a memory to refuse). Deterministic: the same
    name always gives the same result, so reads and writes of one name agree. The common case
    (no ``<`` and nothing a rule could match) returns ``value`` itself."""
    return for_llm(value)


def for_llm(text: str) -> str:
    """``text`` as it may be sent to an LLM: private spans removed, secrets redacted."""
    text = strip_private(text)
    return redact(text, find_secrets(text))
