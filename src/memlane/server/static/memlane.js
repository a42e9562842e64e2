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
    if (res.ok) { say("Saved."); setTimeout(() => location.reload(), 300); return; }
    for (const err of res.data.errors || []) {
      const key = String(err.field).split(".").pop();
      const slot = document.getElementById(`err-${key}`);
      if (slot) slot.textContent = err.message;
    }
    say(`Not saved: ${res.data.detail || res.status}`, true);
  });
  const revert = document.getElementById("revert");
  if (revert) revert.addEventListener("click", async () => {
    const res = await api("DELETE", `/v1/agents/${encodeURIComponent(agent)}/settings/injection`);
    if (res.ok) location.reload(); else say(`Not reverted: ${res.data.detail}`, true);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("settings-form");
  if (form) setupSettings(form);
  const open = document.getElementById("open-agent");
  if (open) open.addEventListener("submit", (ev) => {
    ev.preventDefault();
    location.href = `/agents/${encodeURIComponent(document.getElementById("agent-name").value.trim())}`;
  });
  const forget = document.getElementById("forget");
  if (forget) forget.addEventListener("click", async () => {
    const { id, owner } = forget.dataset;
    const res = await api("DELETE", `/v1/memories/${encodeURIComponent(id)}?owner=${encodeURIComponent(owner)}`);
    if (res.ok) location.href = `/memories?owner=${encodeURIComponent(owner)}`; else say(`Not forgotten: ${res.data.detail}`, true);
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
