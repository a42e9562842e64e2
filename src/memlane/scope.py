"""The scope rule: whose memories a call acts on, and in which project. One function per
question, called by every door (library, CLI, HTTP API, pages, MCP, hooks); none of them
invents its own default.

Owner (:func:`resolve_owner`)::

    explicit argument  >  [scope] owner (memlane.toml / MEMLANE_SCOPE__OWNER)  >  "default"

Project (:func:`project_identity`): a memory is global to its owner (``project`` is ``None``)
or belongs to one project. Reads in a project see that project's memories and the owner's
global ones. A project is named by a stable identity of its git repository, so worktrees, moved
folders and fresh clones keep their memories, and two assistants in one repository share them:

1. the normalised URL of its remote (``origin``, else the first remote):
   ``git@github.com:Acme/App.git`` and ``https://github.com/acme/app`` are both
   ``github.com/acme/app``;
2. else its root commit: ``commit:<40 hex digits>`` (the oldest parentless commit of HEAD);
3. else the folder: ``path:/absolute/path`` (a repository with no commit yet, or no git).

Only the standard library is imported: the hooks call this on every prompt.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms per hook call)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: The owner when neither the call nor ``[scope] owner`` names one.
DEFAULT_OWNER = "default"
#: The environment variable of ``[scope] owner`` (pydantic-settings' nested delimiter).
OWNER_ENV = "MEMLANE_SCOPE__OWNER"
#: Longest project identity accepted (a URL or a path).
MAX_PROJECT_CHARS = 500


#: Longest owner name accepted, in characters (after NFC normalisation): room for an e-mail
#: address or a tenant id; an owner name is shown in every page and picker, and a 300,000-
#: character one made the sessions page 2.4 MB (issue #33).
MAX_OWNER_CHARS = 128


class ScopeError(ValueError):
    """A project that cannot be named, or an owner name that cannot be used (the message says
    why and what to pass instead)."""


#: Unicode categories an owner name may not hold: control (Cc), format (Cf: the zero-width
#: space and joiners, bidirectional overrides, the BOM, the soft hyphen), surrogate (Cs), line
#: and paragraph separators (Zl, Zp): characters that show as nothing or move the text.
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _invisible_ranges() -> str:
    """A regular-expression character class body (Python ``re`` escapes) of every code point
    in :data:`_INVISIBLE` but the surrogates (no text a client sends as UTF-8 holds one), for
    :data:`OWNER_PATTERN`; built from this Python's Unicode tables, so it agrees with
    :func:`check_owner` by construction."""
    import sys
    import unicodedata

    ranges: list[tuple[int, int]] = []
    for code in range(sys.maxunicode + 1):
        if 0xD800 <= code <= 0xDFFF or unicodedata.category(chr(code)) not in _INVISIBLE:
            continue
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    esc = "\\U{:08X}".format
    return "".join(esc(a) if a == b else f"{esc(a)}-{esc(b)}" for a, b in ranges)


def owner_pattern() -> str:
    """The owner names :func:`check_owner` accepts, as a regular expression for the HTTP API's
    JSON schema (``^...$``: no invisible character, at least one that is not blank); lengths
    are the schema's ``maxLength`` (:data:`MAX_OWNER_CHARS`). Built once per call (~0.3 s: a
    walk over Unicode), so callers keep it."""
    invisible = _invisible_ranges()
    return f"^[^{invisible}]*[^\\s{invisible}][^{invisible}]*$"


def check_owner(name: object, what: str = "owner") -> str:
    """``name`` as the owner it names: whitespace around it dropped, Unicode NFC (so two
    spellings of "José" are one owner). Raises :class:`ScopeError` (naming ``what``) for a
    non-string, an empty name, one over :data:`MAX_OWNER_CHARS` characters, or one holding a
    control or zero-width character (names that look alike on a page must be one owner or
    visibly two)."""
    if not isinstance(name, str):
        raise ScopeError(f"{what} must be a string, got {type(name).__name__}")
    value = name.strip()
    ascii_only = value.isascii()
    if not ascii_only:
        import unicodedata

        value = unicodedata.normalize("NFC", value)
    if not value:
        raise ScopeError(f"{what} is empty: name an owner (a user or tenant), e.g. alice")
    if len(value) > MAX_OWNER_CHARS:
        raise ScopeError(
            f"{what} is {len(value):,} characters, over the limit of {MAX_OWNER_CHARS}: "
            "use a shorter name (a user id or tenant id)"
        )
    if ascii_only and value.isprintable():
        return value  # the common case: nothing to look for
    import unicodedata

    for at, ch in enumerate(value):
        if unicodedata.category(ch) in _INVISIBLE:
            raise ScopeError(
                f"{what} holds the invisible character U+{ord(ch):04X} at position {at}: "
                "owner names may not hold control or zero-width characters (they would look "
                "like another owner); remove it"
            )
    return value


def resolve_owner(explicit: str | None, configured: str | None = None) -> str:
    """The owner a call acts on: ``explicit`` when given (non-empty), else ``configured``
    (``[scope] owner``), else :data:`DEFAULT_OWNER`. Whitespace around a name is dropped."""
    for value in (explicit, configured):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return DEFAULT_OWNER


def configured_owner(toml: Mapping[str, Any] | None = None) -> str:
    """``[scope] owner`` from the parsed ``memlane.toml`` ``toml`` with ``MEMLANE_SCOPE__OWNER``
    over it ("" when neither sets it): for readers without :class:`memlane.config.Settings`
    (the hooks)."""
    env = os.environ.get(OWNER_ENV)
    if env is not None:
        return env.strip()
    section = (toml or {}).get("scope") or {}
    value = section.get("owner", "") if isinstance(section, dict) else ""
    return value.strip() if isinstance(value, str) else ""


# ------------------------------------------------------------------------------ project
def git_root(cwd: str | os.PathLike[str]) -> str | None:
    """The top folder of the git work tree holding ``cwd`` (``None`` outside one): the nearest
    ancestor with a ``.git`` entry (a folder, or a worktree's ``.git`` file), found without
    running git. A resolved absolute path (symbolic links followed)."""
    try:
        folder = os.path.realpath(os.path.expanduser(os.fspath(cwd)))
    except (OSError, ValueError):
        return None
    while True:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read()


def _git_dirs(root: str) -> tuple[str, str]:
    """``(git dir, common dir)`` of the work tree at ``root``: a worktree's ``.git`` file points
    to its own git dir, whose ``commondir`` file points to the main repository's."""
    git_dir = os.path.join(root, ".git")
    if os.path.isfile(git_dir):
        text = _read(git_dir).strip()
        if text.startswith("gitdir:"):
            git_dir = os.path.realpath(os.path.join(root, text.removeprefix("gitdir:").strip()))
    common = git_dir
    commondir = os.path.join(git_dir, "commondir")
    if os.path.isfile(commondir):
        common = os.path.realpath(os.path.join(git_dir, _read(commondir).strip()))
    return git_dir, common


# The git config and commit-id shapes below are read with string methods, not patterns: the
# hook reads them on every prompt inside a repository, and :mod:`re` with the :mod:`enum`,
# :mod:`functools` and :mod:`collections` it imports costs milliseconds of every call.

#: Lower-case hex digits (a commit id's).
_HEX = "0123456789abcdef"


def _is_sha(text: str) -> bool:
    """Whether ``text`` is a commit id: SHA-1 (40 lower-case hex digits) or SHA-256 (64)."""
    return len(text) in (40, 64) and not text.strip(_HEX)


def _remote_section(line: str) -> str | None:
    """The name of a ``[remote "NAME"]`` section header line (spaces allowed around the
    parts), else ``None``."""
    text = line.strip()
    if not (text.startswith("[") and text.endswith("]")):
        return None
    inner = text[1:-1].strip()
    after = inner[len("remote") :]
    if not inner.startswith("remote") or not after[:1].isspace():
        return None
    name = after.lstrip()
    if len(name) < 3 or name[0] != '"' or name[-1] != '"' or '"' in name[1:-1]:
        return None
    return name[1:-1]


def _url_value(line: str) -> str | None:
    """The value of a ``url = VALUE`` line (stripped), else ``None``."""
    text = line.strip()
    if not text.startswith("url"):
        return None
    rest = text[len("url") :].lstrip()
    if not rest.startswith("="):
        return None
    return rest[1:].strip() or None


def _scp_like(url: str) -> tuple[str, str] | None:
    """``(host, path)`` of an scp-like git URL, ``[user@]host:path`` (no ``/`` before the
    ``:``, a path not starting with ``//``), else ``None``."""
    tries = [url]
    at = url.find("@")
    if at > 0 and "/" not in url[:at]:
        tries.insert(0, url[at + 1 :])  # with the user part first, as the pattern tried
    for rest in tries:
        colon = rest.find(":")
        host, path = rest[:colon], rest[colon + 1 :]
        if colon > 0 and "/" not in host and path and not path.startswith("//"):
            return host, path
    return None


def remote_url(root: str | os.PathLike[str]) -> str | None:
    """The URL of remote ``origin`` of the repository at ``root`` (else of its first remote),
    read from its ``config`` file; ``None`` without one."""
    try:
        _, common = _git_dirs(os.fspath(root))
        text = _read(os.path.join(common, "config"))
    except OSError:
        return None
    urls: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        if (name := _remote_section(line)) is not None:
            current = name
        elif line.lstrip().startswith("["):
            current = None
        elif current is not None and current not in urls and (value := _url_value(line)):
            urls[current] = value.strip('"')
    if not urls:
        return None
    return urls.get("origin") or next(iter(urls.values()))


def normalise_remote(url: str) -> str:
    """``host/path`` of a git remote URL, lower-cased, without scheme, user, port, ``.git``
    or trailing slashes: the SSH (``git@host:path``) and HTTPS forms of one repository agree.
    A local path remote is returned resolved, as ``path:<folder>``."""
    url = url.strip()
    scp = _scp_like(url)
    if "://" in url:
        rest = url.split("://", 1)[1]
        host, _, path = rest.partition("/")
        host = host.rsplit("@", 1)[-1].split(":", 1)[0]
        if url.startswith("file://"):
            return f"path:{os.path.realpath('/' + path)}"
    elif scp and not url.startswith(("/", ".")):
        host, path = scp
    else:
        return f"path:{os.path.realpath(os.path.expanduser(url))}"
    path = path.strip("/")
    path = path.removesuffix(".git").strip("/")
    return f"{host}/{path}".lower()


def head_commit(root: str | os.PathLike[str]) -> str | None:
    """The commit HEAD of the work tree at ``root`` points to, read from the git files
    without running git: ``HEAD`` (a commit id, or ``ref: <name>``), then the ref as a loose
    file (the worktree's own git dir first, then the common one) or a line of ``packed-refs``.
    ``""`` when HEAD names a branch with no commit yet (a fresh ``git init``); ``None`` when
    the files cannot tell (a ``reftable`` ref store, an unreadable or odd file)."""
    try:
        git_dir, common = _git_dirs(os.fspath(root))
        if os.path.isdir(os.path.join(common, "reftable")):
            return None  # refs in git's binary reftable format: ask git
        value = _read(os.path.join(git_dir, "HEAD")).strip()
        for _ in range(5):  # a symbolic ref may name another (rare); bounded
            if _is_sha(value):
                return value
            if not value.startswith("ref:"):
                return None
            name = value.removeprefix("ref:").strip()
            if not name.startswith("refs/") or ".." in name:
                return None
            loose = [os.path.join(git_dir, name), os.path.join(common, name)]
            found = next((p for p in loose if os.path.isfile(p)), None)
            if found is None:
                return _packed_ref(common, name)
            value = _read(found).strip()
    except OSError:
        return None
    return None


def _packed_ref(common: str, name: str) -> str:
    """The commit of ref ``name`` in ``<common>/packed-refs``; ``""`` when it is not there
    (a branch without a commit)."""
    try:
        text = _read(os.path.join(common, "packed-refs"))
    except FileNotFoundError:
        return ""
    for line in text.splitlines():
        sha, _, ref = line.partition(" ")
        if ref.strip() == name and _is_sha(sha):
            return sha
    return ""


def root_commit(root: str | os.PathLike[str]) -> str | None:
    """The root commit of HEAD (the oldest parentless one) of the repository at ``root``, via
    ``git rev-list`` (``None`` without git, commits, or within 5 s)."""
    import subprocess  # not on the hooks' common path (the identity cache answers there)

    try:
        done = subprocess.run(
            ["git", "-C", os.fspath(root), "rev-list", "--max-parents=0", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.split() if done.returncode == 0 else []
    return lines[-1] if lines and _is_sha(lines[-1]) else None


#: Entries kept in a root-commit cache file (the oldest are dropped first).
ROOT_CACHE_ENTRIES = 256


def _root_key(root: str) -> str | None:
    """What the root commit of ``root``'s HEAD depends on, as a cache key: HEAD's commit id (a
    commit names its whole history, in any repository and folder), and for a shallow clone
    the ``shallow`` file's size and time (a deepening fetch changes the oldest commit seen).
    ``None`` when HEAD cannot be read without git; ``""`` when HEAD has no commit yet."""
    head = head_commit(root)
    if not head:
        return head
    try:
        info = os.stat(os.path.join(_git_dirs(root)[1], "shallow"))
    except FileNotFoundError:
        return head
    except OSError:
        return None
    return f"{head} shallow:{info.st_size}:{info.st_mtime_ns}"


def _cached_root_commit(root: str, cache: str) -> str | None:
    """:func:`root_commit` through the JSON file ``cache`` (``{key: root commit}``, keys by
    :func:`_root_key`): git runs only for a HEAD not seen before. A HEAD without a commit
    needs no git at all (``None``); a cache that cannot be read or written is skipped."""
    from memlane import _fastjson as json

    key = _root_key(root)
    if key == "":
        return None  # a branch with no commit: what git rev-list says too
    if key is None:
        return root_commit(root)
    try:
        with open(cache, encoding="utf-8") as fh:
            known = json.load(fh)
        roots = known if isinstance(known, dict) else {}
    except (OSError, ValueError):
        roots = {}
    hit = roots.get(key)
    if isinstance(hit, str) and _is_sha(hit):
        return hit
    found = root_commit(root)
    if found is None:
        return None
    roots.pop(key, None)
    roots[key] = found
    kept = dict(list(roots.items())[-ROOT_CACHE_ENTRIES:])
    try:
        folder = os.path.dirname(cache)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        tmp = os.path.join(folder, f".{os.path.basename(cache)}.{os.getpid()}")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(kept, fh)
        os.replace(tmp, cache)
    except OSError:
        pass  # the identity is right; the next call asks git again
    return found


def project_identity(
    cwd: str | os.PathLike[str], cache: str | os.PathLike[str] | None = None
) -> str | None:
    """The project of a session run in ``cwd``: the identity of the git repository holding it
    (module docstring: remote URL, else ``commit:<root>``, else ``path:<root>``); ``None``
    outside a repository.

    Only the root commit needs git (``git rev-list``, a process: ~5-20 ms); the rest is read
    from the repository's files. With ``cache`` (a JSON file; the hooks keep
    ``<home>/cache/roots.json``) the root commit is remembered per HEAD commit id, so a call
    runs git only after HEAD moved to a commit not seen before; a HEAD with no commit yet
    needs no git at all. A remote added later wins at once (it is read first, every call);
    a moved or re-cloned repository gives the same identity (the key is the commit, not the
    folder)."""
    root = git_root(cwd)
    if root is None:
        return None
    url = remote_url(root)
    if url:
        return normalise_remote(url)
    commit = root_commit(root) if cache is None else _cached_root_commit(root, os.fspath(cache))
    if commit:
        return f"commit:{commit}"
    return f"path:{root}"


def resolve_project(value: str | None) -> str | None:
    """A ``--project`` value as given by a user: the path of a folder inside a repository
    becomes that repository's identity; anything else is taken as an identity as it is
    (``github.com/acme/app``, ``commit:...``). ``None`` or "" is no project (global).

    Raises:
        ScopeError: a folder outside any git repository, or an identity that is too long.
    """
    if value is None or not value.strip():
        return None
    value = value.strip()
    folder = os.path.expanduser(value)
    if not value.startswith(("commit:", "path:")) and os.path.isdir(folder):
        found = project_identity(folder)
        if found is None:
            raise ScopeError(
                f"--project {value}: the folder is not inside a git repository; pass a "
                "repository's folder, or a project identity as `memlane list` shows it"
            )
        return found
    if len(value) > MAX_PROJECT_CHARS:
        raise ScopeError(f"project identity longer than {MAX_PROJECT_CHARS} characters")
    return value
