// The lease on the task on screen (heartbeats, expiry), the next task preloaded in the
// background, going on to it, and giving leases back.

import { backupKey } from "./draft.js";
import { init } from "./main.js";
import { S, $, $$, api, localTime, show, sleep, status } from "./state.js";
import { flush } from "./undo.js";

export function expired() {
  if (S.leaving) { return; }
  clearInterval(S.heartbeatTimer);
  $$("input, textarea, button", S.form).forEach(function (el) { el.disabled = true; });
  show("Your hold on this task expired, so it went back to the queue and your answer was not " +
    "recorded. Take the next task to go on.", "error");
  var go = document.createElement("a");
  go.href = "/review/" + encodeURIComponent(S.queue);
  go.className = "button";
  go.textContent = "Take the next task";
  S.banner.appendChild(document.createTextNode(" "));
  S.banner.appendChild(go);
  go.focus();
  $("#lease-state").textContent = "Hold expired";
}

export function heartbeat() {
  var ids = [S.lease];
  if (S.pending && S.pending.lease !== S.lease) { ids.push(S.pending.lease); }
  if (S.next && S.next.lease_id) { ids.push(S.next.lease_id); }
  ids.forEach(function (id) {
    api("POST", "/v1/review/leases/" + id + "/heartbeat").then(function (r) {
      if (id !== S.lease) {
        if (!r.ok && S.next && S.next.lease_id === id) { S.next = null; }
        if (!r.ok && S.pending && S.pending.lease === id) { flush(); }
        return;
      }
      if (r.status === 409 || r.status === 404) { expired(); return; }
      if (r.ok) {
        r.json().then(function (b) {
          var at = new Date(b.expires_at || b);
          if (!isNaN(at)) {
            $("#lease-state").textContent = "Held until " + localTime(at);
          }
        }, function () { /* no body */ });
      }
    }, function () { status("Connection lost: retrying"); });
  });
}

// --- the next task, preloaded ----------------------------------------------------------------

export function preload() {
  // Not while leaving the page (an undo, a give-back): a task leased now would stay held
  // by this reviewer with no page showing it.
  if (S.preloading || S.leaving) { return; }
  S.preloading = api("POST", "/v1/review/queues/" + encodeURIComponent(S.queue) + "/next").then(function (r) {
    if (r.status === 204) { S.next = { none: true }; return null; }
    if (!r.ok) { return null; }
    return r.json().then(function (view) {
      if (S.leaving && !S.submitting) { return releaseLease(view.lease_id); }
      S.next = { lease_id: view.lease_id };
      return fetch("/review/leases/" + view.lease_id, { credentials: "same-origin" })
        .then(function (page) { return page.ok ? page.text() : null; })
        .then(function (html) {
          if (html && S.next && S.next.lease_id === view.lease_id) {
            S.next.html = html;
            S.main.dataset.next = "ready";
          }
        });
    });
  }).catch(function () { S.next = null; });
}

export function releaseNext() {
  if (S.next && S.next.lease_id) {
    var id = S.next.lease_id;
    S.next = null;
    return releaseLease(id);
  }
  return Promise.resolve();
}

export function advance() {
  S.leaving = true;
  if (S.preloading && !(S.next && (S.next.html || S.next.none))) {
    // Submitted before the next task finished loading: wait for it a moment.
    var loading = S.preloading;
    S.preloading = null;
    Promise.race([loading, sleep(3000)]).then(advance, advance);
    return;
  }
  clearInterval(S.heartbeatTimer);
  if (!(S.pending && S.pending.lease === S.lease)) {
    try { localStorage.removeItem(backupKey()); } catch (e) { /* private mode */ }
  }
  if (S.next && S.next.html) {
    var doc = new DOMParser().parseFromString(S.next.html, "text/html");
    var url = "/review/leases/" + S.next.lease_id;
    S.next = null;
    document.title = doc.title;
    document.body.replaceWith(document.adoptNode(doc.body));
    history.pushState(null, "", url);
    init();
    return;
  }
  var target = S.next && S.next.lease_id ? "/review/leases/" + S.next.lease_id : "/review/" + encodeURIComponent(S.queue);
  S.next = null;
  location.assign(target);
}

// Give back the task on screen and the preloaded one, then go on: the page that opens next
// preloads its next task at once, and a give-back still in flight (or a preload still
// leasing a task) would leave that task held by this reviewer: "no more tasks" while it
// waits in the queue. At most a few seconds.
export function giveBackThen(held, go) {
  var loading = S.preloading ? Promise.race([S.preloading, sleep(2000)]) : Promise.resolve();
  loading.then(function () {
    var back = [releaseNext()];
    if (S.lease && S.lease !== held.lease) { back.push(releaseLease(S.lease)); }
    return Promise.race([Promise.all(back), sleep(2000)]);
  }).then(go, go);
}

export function releaseLease(id) {
  return fetch("/v1/review/leases/" + id + "/release", {
    method: "POST", keepalive: true, credentials: "same-origin",
    headers: { "X-CSRF-Token": S.csrf },
  }).catch(function () { /* it expires on its own */ });
}
