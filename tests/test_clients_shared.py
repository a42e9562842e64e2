"""One repository, four assistants: a project memory that Codex CLI stored through memlane's MCP
``remember`` (the real client, ``tests/test_clients_codex.py``'s set-up) reaches Qwen Code,
Copilot CLI and OpenCode (the real clients, hooks installed by ``memlane hooks install``) in
the same repository, and none of them in another repository. What reaches each model is read
from the requests the fake model servers received (Responses API for Codex, chat completions
for the others: one server shared, each client's requests told apart by order)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import client_support as cs
from memlane.eval import fake_models

pytestmark = pytest.mark.clients

CI = "The CI runners use Ubuntu 24.04 images with 8 GB of memory"
ASK = "Which image do the CI runners use?"


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[cs.ClientLab]:
    try:
        made = cs.make_client_lab(tmp_path, "chat")
    except RuntimeError as exc:
        pytest.fail(f"the clients could not be installed: {exc}")
    try:
        yield made
    finally:
        made.close()


def test_a_project_memory_one_assistant_stored_reaches_the_others_in_that_repository_only(
    lab: cs.ClientLab,
) -> None:
    codex = cs.ClientLab(lab.root, fake_models.start("responses"), lab.env)
    try:
        env = {k: lab.env[k] for k in ("MEMLANE_HOME", "MEMLANE_EMBEDDING__PROVIDER",
                                       "PYTHONPATH")}  # fmt: skip
        cs.codex_config(codex)
        config = lab.user_home / ".codex" / "config.toml"
        server = [
            "", "[mcp_servers.memlane]", f"command = {json.dumps(sys.executable)}",
            'args = ["-m", "memlane", "mcp"]', "required = true",
            'default_tools_approval_mode = "approve"',
            "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }",
        ]  # fmt: skip
        config.write_text(config.read_text() + "\n".join(server) + "\n")
        codex.install("codex")
        shop = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
        blog = cs.make_repo(lab.root / "blog", "https://github.com/acme/blog")
        codex.fake.tool_use_on["Please remember"] = ("mcp__memlane__remember", {"content": CI})
        cs.codex_exec(codex, shop, "Please remember the CI runner image.", resume=False)
    finally:
        codex.fake.close()
    (stored,) = json.loads(lab.memlane("list", "--json"))
    assert stored["project"] == "github.com/acme/shop"
    memory = {stored["id"]: CI}
    cs.qwen_settings(lab, {"memory": {"enableManagedAutoMemory": False,
                                      "enableManagedAutoDream": False}})  # fmt: skip
    cs.opencode_config(lab)
    for client in ("qwen", "copilot", "opencode"):
        lab.install(client)
    held: dict[tuple[str, str], int] = {}
    for repo in (shop, blog):
        for client, run in (("qwen", cs.qwen_once), ("copilot", cs.copilot_once),
                            ("opencode", cs.opencode_run)):  # fmt: skip
            before = len(lab.fake.model_requests())
            run(lab, repo, ASK, resume=False)
            mine = cs.rows(lab.fake, memory)[before:]
            held[(client, repo.name)] = max((r.memories.get(stored["id"], 0) for r in mine),
                                            default=0)  # fmt: skip
    assert held == {
        ("qwen", "shop"): 1, ("copilot", "shop"): 1, ("opencode", "shop"): 1,
        ("qwen", "blog"): 0, ("copilot", "blog"): 0, ("opencode", "blog"): 0,
    }, held  # fmt: skip
