"""memlane's OpenCode plugin: one local JavaScript file, written by ``memlane hooks install
--client opencode`` into ``~/.config/opencode/plugins/`` (or the project's
``.opencode/plugins/``). A file, not an npm package: OpenCode npm-installs plugin packages
when it starts and hangs without the registry.

Checked with ``opencode-ai`` 1.18.33 (``tests/test_clients_opencode.py``): OpenCode loads
``{plugin,plugins}/*.{ts,js}`` and calls each module's exported functions for their hooks.

- ``chat.message`` (``input``: ``sessionID``, ``agent``, ``model``, ``messageID``; ``output``:
  ``message``, ``parts``) runs once per user message, before it is stored: the plugin runs
  ``memlane hook UserPromptSubmit --client opencode`` with the message's text, OpenCode's
  session id and the message's id (``message_id``: the turn's key, so a message the hook sees
  twice is one turn), and adds the block as one more text part of the message: it reaches the model
  inside the user's message and stays in the history.
- ``event`` ``session.compacted`` (``properties.sessionID``): ``memlane hook PostCompact``
  resets the session, so the next message brings the memories back.
- memlane's MCP ``remember`` (OpenCode names the tool ``<server>_remember``): before the hook
  runs, the plugin reads the session's messages through the client OpenCode hands it
  (``client.session.messages({path: {id}})``: ``{info, parts}``, a call a ``tool`` part with
  ``tool``, ``state.status``, ``state.output``, a compaction a ``compaction`` part) and sends
  the outputs of the completed ``remember`` calls of a server whose name holds ``memlane``
  since the last compaction under ``memlane_remembered``; :func:`remembered_ids` reads the
  ids from them and the hook leaves those memories out (the model holds the call).

The hook command is the same as every client's (the server, the daemon, the fallback, the
log: :mod:`memlane.hooks.run`); the plugin only carries the text in and the part out.
"""

from __future__ import annotations

from memlane import _fastjson as json

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

// The outputs of this session's completed memlane `remember` calls since its last compaction
// (the model holds those memories already); [] when the messages cannot be read.
async function remembered(client, sessionID) {
  let messages = [];
  try {
    const got = await client.session.messages({ path: { id: sessionID } });
    messages = Array.isArray(got?.data) ? got.data : [];
  } catch {
    return [];
  }
  let outputs = [];
  for (const message of messages) {
    for (const part of message.parts || []) {
      const tool = String(part.tool || "");
      if (part.type === "compaction") outputs = [];
      else if (part.type === "tool" && tool.includes("memlane") && tool.endsWith("remember")
        && part.state?.status === "completed" && typeof part.state.output === "string") {
        outputs.push(part.state.output);
      }
    }
  }
  return outputs;
}

function partId() {
  const stamp = Date.now().toString(16).padStart(12, "0");
  const tail = Math.random().toString(36).slice(2, 16).padEnd(14, "0");
  return `prt_${stamp}${tail}`;
}

export const MemlanePlugin = async ({ directory, client }) => ({
  "chat.message": async (input, output) => {
    const text = (output.parts || [])
      .filter((p) => p.type === "text" && !p.synthetic)
      .map((p) => p.text)
      .join("\\n")
      .trim();
    if (!text || !input.sessionID) return;
    const printed = hook("UserPromptSubmit", {
      session_id: input.sessionID,
      message_id:
        (output.message || {}).id || ((output.parts || [])[0] || {}).messageID ||
        input.messageID || "",
      prompt: text,
      cwd: directory,
      hook_event_name: "UserPromptSubmit",
      memlane_remembered: await remembered(client, input.sessionID),
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


#: The payload key under which the plugin sends the session's ``remember`` outputs.
REMEMBERED_KEY = "memlane_remembered"


def remembered_ids(outputs: object) -> list[str]:
    """Ids of the memories in ``outputs`` (the plugin's ``memlane_remembered``: the text
    outputs of memlane's MCP ``remember`` calls, each ``WriteResult.to_dict()`` as JSON, the
    memory's id under ``memory``), in order, once each. Anything else is skipped: never
    raises."""
    from memlane.hooks.transcript import remembered_in_text

    ids: list[str] = []
    for output in outputs if isinstance(outputs, list) else []:
        found = remembered_in_text(output)
        if found is not None and found not in ids:
            ids.append(found)
    return ids


def plugin_text(command: str, home: str | None = None) -> str:
    """The plugin's source with ``command`` (and ``--home home``) starting memlane's hook."""
    import shlex

    tail = f" --home {shlex.quote(home)}" if home else ""
    return PLUGIN.replace("__COMMAND__", json.dumps(command)).replace("__HOME__", json.dumps(tail))
