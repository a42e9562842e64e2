"""memlane's OpenCode plugin: one local JavaScript file, written by ``memlane hooks install
--client opencode`` into ``~/.config/opencode/plugins/`` (or the project's
``.opencode/plugins/``). A file, not an npm package: OpenCode npm-installs plugin packages
when it starts and hangs without the registry.

Checked with ``opencode-ai`` 1.18.33 (``tests/test_clients_opencode.py``): OpenCode loads
``{plugin,plugins}/*.{ts,js}`` and calls each module's exported functions for their hooks.

- ``chat.message`` (``input``: ``sessionID``, ``agent``, ``model``, ``messageID``; ``output``:
  ``message``, ``parts``) runs once per user message, before it is stored: the plugin runs
  ``memlane hook UserPromptSubmit --client opencode`` with the message's text and OpenCode's
  session id, and adds the block as one more text part of the message: it reaches the model
  inside the user's message and stays in the history.
- ``event`` ``session.compacted`` (``properties.sessionID``): ``memlane hook PostCompact``
  resets the session, so the next message brings the memories back.

The hook command is the same as every client's (the server, the daemon, the fallback, the
log: :mod:`memlane.hooks.run`); the plugin only carries the text in and the part out.
"""

from __future__ import annotations

import json

PLUGIN = """// memlane's OpenCode plugin (written by `memlane hooks install --client opencode`;
// docs/integrations.md). Runs memlane's hook on each user message and after a compaction.
import { spawnSync } from "node:child_process";

const COMMAND = __COMMAND__;
const HOME = __HOME__;
const TIMEOUT_MS = 10000;

function hook(event, payload) {
  const done = spawnSync("/bin/sh", ["-c", `${COMMAND} hook ${event} --client opencode${HOME}`], {
    input: JSON.stringify(payload),
    encoding: "utf8",
    timeout: TIMEOUT_MS,
  });
  return done.status === 0 ? (done.stdout || "").trim() : "";
}

function partId() {
  const stamp = Date.now().toString(16).padStart(12, "0");
  const tail = Math.random().toString(36).slice(2, 16).padEnd(14, "0");
  return `prt_${stamp}${tail}`;
}

export const MemlanePlugin = async ({ directory }) => ({
  "chat.message": async (input, output) => {
    const text = (output.parts || [])
      .filter((p) => p.type === "text" && !p.synthetic)
      .map((p) => p.text)
      .join("\\n")
      .trim();
    if (!text || !input.sessionID) return;
    const printed = hook("UserPromptSubmit", {
      session_id: input.sessionID,
      prompt: text,
      cwd: directory,
      hook_event_name: "UserPromptSubmit",
    });
    if (!printed) return;
    let block = "";
    try {
      block = JSON.parse(printed).hookSpecificOutput.additionalContext || "";
    } catch {
      return;
    }
    if (!block) return;
    const first = (output.parts || [])[0] || {};
    output.parts.push({
      id: partId(),
      sessionID: input.sessionID,
      messageID: first.messageID || input.messageID,
      type: "text",
      text: block,
      synthetic: true,
    });
  },
  event: async ({ event }) => {
    if (event.type === "session.compacted" && event.properties?.sessionID) {
      hook("PostCompact", { session_id: event.properties.sessionID, cwd: directory });
    }
  },
});
"""


def plugin_text(command: str, home: str | None = None) -> str:
    """The plugin's source with ``command`` (and ``--home home``) starting memlane's hook."""
    import shlex

    tail = f" --home {shlex.quote(home)}" if home else ""
    return PLUGIN.replace("__COMMAND__", json.dumps(command)).replace("__HOME__", json.dumps(tail))
