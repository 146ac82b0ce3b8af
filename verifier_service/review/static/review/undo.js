// Undo: the last answer waits out its window (kept in sessionStorage across pages) before it
// is sent; the toast counts down and offers Undo (z).

import { giveBackThen } from "./lease.js";
import { counted } from "./progress.js";
import { S, $, PENDING } from "./state.js";
import { send } from "./submit.js";

export function keepPending(held) {
  S.pending = held;
  held.csrf = S.csrf;
  try { sessionStorage.setItem(PENDING, JSON.stringify(held)); } catch (e) { /* private mode */ }
}

export function dropPending() {
  S.pending = null;
  clearInterval(S.pendingTimer);
  S.pendingTimer = null;
  try { sessionStorage.removeItem(PENDING); } catch (e) { /* private mode */ }
}

export function showToast(html) {
  if (!S.toast || !document.body.contains(S.toast)) {
    S.toast = document.createElement("div");
    S.toast.id = "undo";
    S.toast.className = "banner undo";
    S.toast.setAttribute("role", "status");
    document.body.appendChild(S.toast);
  }
  S.toast.hidden = false;
  S.toast.textContent = "";
  S.toast.appendChild(html);
}

export function hideToast(after) {
  var t = S.toast;
  setTimeout(function () { if (t && !S.pending) { t.hidden = true; } }, after || 0);
}

export function tick() {
  if (!S.pending) { return; }
  var left = Math.ceil((S.pending.until - Date.now()) / 1000);
  if (left <= 0) { flush(); return; }
  var text = $("#undo-text");
  if (text) { text.textContent = "Your last answer is sent in " + left + " s."; return; }
  var frag = document.createDocumentFragment();
  var span = document.createElement("span");
  span.id = "undo-text";
  span.textContent = "Your last answer is sent in " + left + " s.";
  var btn = document.createElement("button");
  btn.type = "button";
  btn.id = "undo-button";
  btn.className = "secondary";
  btn.innerHTML = "Undo <kbd>z</kbd>";
  btn.addEventListener("click", undo);
  frag.appendChild(span);
  frag.appendChild(btn);
  showToast(frag);
}

export function watchPending() {
  // On every review page: the answer waiting out its undo window, counted down.
  var kept = null;
  try { kept = JSON.parse(sessionStorage.getItem(PENDING) || "null"); } catch (e) { kept = null; }
  if (!kept) { return; }
  if (kept.lease === S.lease) {
    // Back (or a reload) on the task just answered: that is an undo.
    dropPending();
    return;
  }
  S.pending = kept;
  clearInterval(S.pendingTimer);
  S.pendingTimer = setInterval(tick, 250);
  tick();
}

export function flush(keepalive) {
  if (!S.pending) { return Promise.resolve(); }
  var held = S.pending;
  dropPending();
  if (keepalive) { send(held, true); return Promise.resolve(); }
  return send(held).then(function (r) {
    if (r.ok) {
      counted(held);
      try { localStorage.removeItem("review-draft:" + held.lease); } catch (e) { /* private */ }
      var done = document.createElement("span");
      done.id = "undo-text";
      done.textContent = "Your last answer is recorded.";
      showToast(done);
      hideToast(2500);
      return;
    }
    var msg = document.createElement("span");
    msg.textContent = "Your last answer was not recorded: " + r.message;
    showToast(msg);
    S.toast.className = "banner undo error";
  });
}

export function undo() {
  if (!S.pending) { return; }
  var held = S.pending;
  dropPending();
  S.leaving = true;
  clearInterval(S.heartbeatTimer);
  // The task on screen goes back to the queue; the answered one opens with its answer.
  giveBackThen(held, function () { location.assign("/review/leases/" + held.lease); });
}
