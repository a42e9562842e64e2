"""``/v1/settings/injection`` (the defaults of every agent) and
``/v1/agents/{name}/settings/injection`` (one agent's override): read, change, revert.

A change is checked as the file would be on load (422 naming the key and what is allowed,
nothing written), written to ``memlane.toml`` atomically with its comments kept, and used by the
next call. Settings are the server's: a token bound to one owner gets 404.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel

from memlane.server.auth import caller, require_admin
from memlane.server.models import InjectionOut, InjectionPatch
from memlane.server.state import Principal, ServerState

Caller = Annotated[Principal, Depends(caller)]
#: Agent names as TOML bare keys: letters, digits, ``_`` and ``-``.
AGENT_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
AgentName = Annotated[str, Path(pattern=AGENT_PATTERN, description="The agent's name.")]


def patch_values(body: BaseModel) -> dict[str, Any]:
    """The keys a PUT body sets (``null`` and absent keys are left alone)."""
    values = body.model_dump(mode="json", exclude_unset=True)
    return {k: v for k, v in values.items() if v is not None}


def valid_agent(name: str) -> bool:
    return re.fullmatch(AGENT_PATTERN, name) is not None


def router(state: ServerState) -> APIRouter:
    api = APIRouter(tags=["settings"])

    def out(agent: str | None) -> InjectionOut:
        settings, overrides = state.injection(agent)
        return InjectionOut(
            agent=agent, overridden=bool(overrides), overrides=overrides, settings=settings
        )

    @api.get("/settings/injection", response_model=InjectionOut)
    def get_defaults(who: Caller) -> InjectionOut:
        require_admin(who)
        return out(None)

    @api.put("/settings/injection", response_model=InjectionOut)
    def put_defaults(body: InjectionPatch, who: Caller) -> InjectionOut:  # type: ignore[valid-type]
        """Change the defaults of every agent (only the keys given)."""
        require_admin(who)
        state.update_injection(None, patch_values(body))
        return out(None)

    @api.get("/agents/{name}/settings/injection", response_model=InjectionOut)
    def get_agent(name: AgentName, who: Caller) -> InjectionOut:
        require_admin(who)
        return out(name)

    @api.put("/agents/{name}/settings/injection", response_model=InjectionOut)
    def put_agent(name: AgentName, body: InjectionPatch, who: Caller) -> InjectionOut:  # type: ignore[valid-type]
        """Override the defaults for one agent (only the keys given; the others follow the
        defaults)."""
        require_admin(who)
        state.update_injection(name, patch_values(body))
        return out(name)

    @api.delete("/agents/{name}/settings/injection", response_model=InjectionOut)
    def revert_agent(name: AgentName, who: Caller) -> InjectionOut:
        """Remove the agent's override: it uses the defaults again."""
        require_admin(who)
        state.revert_agent(name)
        return out(name)

    return api
