"""The operator's web pages (server-rendered)."""

from __future__ import annotations

from fastapi import APIRouter

from memlane.server.state import ServerState


def router(state: ServerState) -> APIRouter:
    return APIRouter(include_in_schema=False)
