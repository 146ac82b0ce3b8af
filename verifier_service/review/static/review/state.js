// What the review page's modules share: the page's state (one object, so that every module
// sees and changes the same values), its constants and small helpers.

export const S = {
  main: null, form: null, banner: null, saveState: null, dims: [], current: 0, step: 0,
  lease: null, queue: null, csrf: null,
  heartbeatTimer: null, saveTimer: null, submitting: false, leaving: false,
  next: null, // {lease_id, html} of the preloaded next task, or {none: true}
  preloading: null, // the promise of the preload under way
  pending: null, pendingTimer: null, toast: null, // the answer waiting out its undo window
};

export const DRAFT_DEBOUNCE_MS = 700;
export const UNDO_MS = 8000; // an answer can be taken back this long; then it is sent and counts
export const PENDING = "review-pending"; // sessionStorage: the answer waiting out its undo window

export function $(sel, root) { return (root || document).querySelector(sel); }
export function $$(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }

export function api(method, path, body, headers) {
  var h = { "X-CSRF-Token": S.csrf, "Accept": "application/json" };
  if (body !== undefined) { h["Content-Type"] = "application/json"; }
  for (var k in headers || {}) { h[k] = headers[k]; }
  return fetch(path, {
    method: method, headers: h, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

export function sleep(ms) { return new Promise(function (r) { setTimeout(r, ms); }); }

export function show(message, kind) {
  S.banner.textContent = message;
  S.banner.className = "banner " + (kind || "info");
  S.banner.hidden = false;
}

export function status(text) { if (S.saveState) { S.saveState.textContent = text; } }

export function localTime(at) {
  return at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}
