"""The OpenAPI document as the server really answers (issue #24): every error is RFC 9457
problem details (``application/problem+json``, the :class:`~memlane.server.models.Problem`
schema) with the statuses each operation can give, and the bearer security scheme.

FastAPI's generated document says a 422 is ``application/json`` with a list ``detail``
(``HTTPValidationError``) and omits 401, 403, 404, 413, 421 and 503; :func:`truthful` rewrites
it from the routes' own shape (a body: 413; a path parameter or an owner: 404; a write: 403);
an error status a route declares itself (``responses={409: {"description": ...}}``) becomes a
problem+json response with that description.
"""

from __future__ import annotations

import copy
from typing import Any

_PROBLEM = {"$ref": "#/components/schemas/Problem"}
_WRITES = {"post", "put", "patch", "delete"}

#: (status, when it is given).
_ALWAYS = [
    ("401", "No or a wrong bearer token (when the server has one)."),
    ("421", "The Host header names no host of this server ([server] allowed_hosts)."),
    ("422", "Invalid input: each field named in errors[]."),
    ("503", "The store is busy (another process held the write lock); retry after Retry-After."),
]


def _problem(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "description": description,
        "content": {"application/problem+json": {"schema": _PROBLEM}},
    }
    if headers:
        out["headers"] = headers
    return out


def truthful(
    document: dict[str, Any], *, problem: dict[str, Any], service_paths: frozenset[str]
) -> dict[str, Any]:
    """``document`` with problem+json errors (``problem``: the Problem JSON schema), the
    statuses each operation gives and the bearer scheme; ``service_paths`` (``/health``) need no
    token and answer no 404/413."""
    doc = copy.deepcopy(document)
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas["Problem"] = problem
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    components["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "[server] token, or a token of [server.owner_tokens] (one owner). "
            "Without any token configured the server needs none (loopback only).",
        }
    }
    for path, item in doc.get("paths", {}).items():
        for method, op in item.items():
            if method not in _WRITES | {"get"}:
                continue
            responses = op.setdefault("responses", {})
            if path in service_paths:
                for status, text in _ALWAYS[1:2]:
                    responses[status] = _problem(text)
                op["security"] = [{}]
                continue
            op["security"] = [{"bearer": []}, {}]
            for status, declared in list(responses.items()):  # a route's own error statuses
                if status.startswith(("4", "5")) and "content" not in declared:
                    responses[status] = _problem(declared.get("description", ""))
            for status, text in _ALWAYS:
                headers = None
                if status == "503":
                    headers = {"Retry-After": {"schema": {"type": "integer"}}}
                if status == "401":
                    headers = {"WWW-Authenticate": {"schema": {"type": "string"}}}
                responses[status] = _problem(text, headers)
            if "{" in path or any(p.get("name") == "owner" for p in op.get("parameters", [])):
                responses["404"] = _problem(
                    "Not found in the caller's scope (another owner's id is the same 404)."
                )
            if "requestBody" in op or "owner" in str(op.get("requestBody", "")):
                responses["404"] = _problem(
                    "Not found in the caller's scope (a token bound to another owner)."
                )
                responses["413"] = _problem("The body is over [server] max_body_bytes.")
            if method in _WRITES:
                responses["403"] = _problem(
                    "A cross-site request (Origin or Sec-Fetch-Site of another site)."
                )
            if (op.get("tags") and "review" in op["tags"]) or path.endswith("/learn"):
                responses["502"] = _problem("The configured LLM failed.")
    return doc
