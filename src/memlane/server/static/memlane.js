// memlane web pages: plain JavaScript over the same /v1 API (same-origin; the server's
// HttpOnly cookie, set by POST /login, carries the token).
"use strict";

async function api(method, url, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(url, init);
  const data = await resp.json().catch(() => ({}));
  return { ok: resp.ok, status: resp.status, data };
}

function say(text, bad) {
  const el = document.getElementById("status");
  if (el) { el.textContent = text; el.className = bad ? "bad" : "good"; }
}

function formValues(form) {
  const out = {};
  for (const el of form.querySelectorAll("input[name], select[name]")) {
    if (el.name === "pinned_types") continue;
    if (el.type === "checkbox") out[el.name] = el.checked;
    else if (el.dataset.kind) out[el.name] = el.value.trim() === "" || isNaN(Number(el.value)) ? el.value : Number(el.value);
    else out[el.name] = el.value;
  }
  out.pinned_types = [...form.querySelectorAll("input[name=pinned_types]:checked")].map((e) => e.value);
  return out;
}

function same(a, b) { return JSON.stringify(a) === JSON.stringify(b); }

function setupSettings(form) {
  const agent = form.dataset.agent;
  const defaults = JSON.parse(form.dataset.defaults);
  const overrides = JSON.parse(form.dataset.overrides);
  const ambient = document.getElementById("f-ambient_enabled");
  if (ambient) ambient.addEventListener("change", () => { document.getElementById("ambient-fields").hidden = !ambient.checked; });
  const range = document.getElementById("f-semantic_threshold");
  if (range) range.addEventListener("input", () => { document.getElementById("o-semantic_threshold").textContent = range.value; });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    for (const e of form.querySelectorAll(".error")) e.textContent = "";
    let values = formValues(form);
    if (agent) {  // an override holds what differs from the defaults (and what it held)
      values = Object.fromEntries(Object.entries(values).filter(([k, v]) => k in overrides || !same(v, defaults[k])));
    } else {  // only what changed: an untouched value stays unset in the file, so one derived
      // from the embedding model's profile (semantic_threshold) follows a model switch
      values = Object.fromEntries(Object.entries(values).filter(([k, v]) => !same(v, defaults[k])));
    }
    const url = agent ? `/v1/agents/${encodeURIComponent(agent)}/settings/injection` : "/v1/settings/injection";
    const res = await api("PUT", url, values);
    if (res.ok) { say("Saved."); setTimeout(() => { location.href = `${location.pathname}?saved=1`; }, 300); return; }
    for (const err of res.data.errors || []) {
      const key = String(err.field).split(".").pop();
      const slot = document.getElementById(`err-${key}`);
      if (slot) slot.textContent = err.message;
    }
    say(`Not saved: ${res.data.detail || res.status}`, true);
  });
  for (const btn of form.querySelectorAll(".revert-field")) {
    btn.addEventListener("click", async () => {  // this field follows the default again
      const url = `/v1/agents/${encodeURIComponent(agent)}/settings/injection`;
      const rest = { ...overrides };
      delete rest[btn.dataset.key];
      let res = await api("DELETE", url);
      if (res.ok && Object.keys(rest).length) res = await api("PUT", url, rest);
      if (res.ok) location.href = `${location.pathname}?saved=1`;
      else say(`Not reverted: ${res.data.detail || res.status}`, true);
    });
  }
  const revert = document.getElementById("revert");
  if (revert) revert.addEventListener("click", async () => {
    const res = await api("DELETE", `/v1/agents/${encodeURIComponent(agent)}/settings/injection`);
    if (res.ok) location.reload(); else say(`Not reverted: ${res.data.detail}`, true);
  });
}

function localTimes() {  // <time datetime=UTC>: shown in the browser's time zone, to the minute
  const pad = (n) => String(n).padStart(2, "0");
  for (const el of document.querySelectorAll("time[datetime]")) {
    const d = new Date(el.getAttribute("datetime"));
    if (isNaN(d)) continue;
    el.textContent = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
    el.title = `${el.getAttribute("datetime")} (UTC)`;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  localTimes();
  const scope = document.getElementById("scope");
  if (scope) {  // the pickers apply at once; the button stays for keyboards without scripts
    const owner = document.getElementById("pick-owner");
    owner.addEventListener("change", () => { document.getElementById("pick-agent").value = ""; scope.submit(); });
    document.getElementById("pick-agent").addEventListener("change", () => scope.submit());
  }
  if (new URLSearchParams(location.search).get("saved") === "1") say("Saved.");
  const form = document.getElementById("settings-form");
  if (form) setupSettings(form);
  const open = document.getElementById("open-agent");
  if (open) open.addEventListener("submit", (ev) => {
    ev.preventDefault();
    location.href = `/agents/${encodeURIComponent(document.getElementById("agent-name").value.trim())}`;
  });
  const forget = document.getElementById("forget");
  const restore = document.getElementById("restore");
  const dialog = document.getElementById("confirm-forget");
  if (forget && dialog) forget.addEventListener("click", () => dialog.showModal());
  if (dialog) dialog.addEventListener("close", async () => {
    if (dialog.returnValue !== "forget") return;
    const { id, owner } = forget.dataset;
    const res = await api("DELETE", `/v1/memories/${encodeURIComponent(id)}?owner=${encodeURIComponent(owner)}`);
    if (!res.ok) { say(`Not forgotten: ${res.data.detail}`, true); return; }
    forget.hidden = true;
    restore.hidden = false;
    document.getElementById("m-status").textContent = "forgotten";
    say("Forgotten: no longer searched or injected. Restore brings it back.");
    restore.focus();
  });
  if (restore) restore.addEventListener("click", async () => {
    const { id, owner } = restore.dataset;
    const res = await api("POST", `/v1/memories/${encodeURIComponent(id)}/restore?owner=${encodeURIComponent(owner)}`);
    if (!res.ok) { say(`Not restored: ${res.data.detail}`, true); return; }
    restore.hidden = true;
    if (forget) forget.hidden = false;
    document.getElementById("m-status").textContent = "active";
    say("Restored: searched and injected again.");
  });
  const reset = document.getElementById("reset");
  if (reset) reset.addEventListener("click", async () => {
    const { id, owner } = reset.dataset;
    const reason = document.getElementById("reason").value;
    const res = await api("POST", `/v1/sessions/${encodeURIComponent(id)}/reset`, { reason, owner });
    if (res.ok) location.reload(); else say(`Not reset: ${res.data.detail}`, true);
  });
  for (const btn of document.querySelectorAll(".review-btn")) {
    btn.addEventListener("click", async () => {
      const { id, owner, action } = btn.dataset;
      const res = await api("POST", `/v1/dedup-log/${encodeURIComponent(id)}/${action}?owner=${encodeURIComponent(owner)}`);
      if (!res.ok) { say(`Not done: ${res.data.detail || res.status}`, true); return; }
      say(res.data.message, res.data.action === "conflict");
      const cell = document.getElementById(`review-${id}`);
      if (res.data.action !== "conflict") {
        cell.querySelector(".review-status").textContent = res.data.entry.review_status;
        const gone = res.data.action === "reversed" ? ".review-btn" : "[data-action=confirm]";
        for (const b of cell.querySelectorAll(gone)) b.remove();
      }
    });
  }
});
