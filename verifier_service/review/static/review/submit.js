// Submit (after the undo window when the next task is ready) and skip; an answer is posted
// until the server says yes or no.

import { answer, missing } from "./draft.js";
import { focusDim } from "./keys.js";
import { advance, expired } from "./lease.js";
import { counted } from "./progress.js";
import { S, $, UNDO_MS, api, show, sleep, status } from "./state.js";
import { flush, keepPending } from "./undo.js";

export function submit() {
  if (S.submitting) { return; }
  var gaps = missing();
  if (gaps.length) {
    focusDim(S.dims.indexOf(gaps[0]) >= 0 ? S.dims.indexOf(gaps[0]) : 0, gaps[0]);
    show("Answer “" + gaps[0].dataset.dim + "”" +
      (gaps[0].dataset.step !== undefined ? " for step " + (Number(gaps[0].dataset.step) + 1) : "") +
      " first.", "error");
    return;
  }
  S.submitting = true;
  clearTimeout(S.saveTimer);
  var body = answer();
  var key = S.form.elements.submit_key.value; // one key per answer: a retry records it once
  $("#submit").disabled = true;
  status("Submitting…");
  // The draft on the server holds the answer too: an undo opens the task with it filled in.
  api("PUT", "/v1/review/leases/" + S.lease + "/draft", { draft: body }).catch(function () { /* kept locally */ });
  var held = { lease: S.lease, queue: S.queue, body: body, key: key };
  readyNext().then(function () {
    if (S.next && S.next.html) {
      // The next task is ready: go on now; this answer is sent when its undo window ends.
      held.until = Date.now() + UNDO_MS;
      keepPending(held);
      advance();
      return;
    }
    // No next task on screen: the answer waiting before this one first (so that the queue
    // does not hand its task back), then this one, at once.
    flush().then(function () { return send(held); }).then(function (r) {
      if (r.ok) { status("Submitted"); counted(held); advance(); return; }
      S.submitting = false;
      $("#submit").disabled = false;
      if (r.status === 409 || r.status === 404) { expired(); return; }
      show("Not recorded: " + r.message, "error");
    });
  });
}

export function readyNext() {
  if (S.preloading && !(S.next && (S.next.html || S.next.none))) {
    return Promise.race([S.preloading, sleep(3000)]).catch(function () { return null; });
  }
  return Promise.resolve();
}

// POST an answer until the server says yes or no (network errors and 5xx retried with
// backoff): {ok, status, message}.
export function send(held, keepalive) {
  var attempt = 0;
  return new Promise(function (resolve) {
    (function again() {
      var h = { "X-CSRF-Token": S.csrf || held.csrf, "Accept": "application/json",
        "Content-Type": "application/json", "Idempotency-Key": held.key };
      fetch("/v1/review/leases/" + held.lease + "/submit", {
        method: "POST", headers: h, credentials: "same-origin", keepalive: !!keepalive,
        body: JSON.stringify(held.body),
      }).then(function (r) {
        if (r.ok) { resolve({ ok: true, status: r.status }); return; }
        if (r.status >= 500 || r.status === 429) { throw new Error("retry"); }
        r.json().then(function (b) {
          resolve({ ok: false, status: r.status, message: (b.message || r.status) + (b.hint ? " (" + b.hint + ")" : "") });
        }, function () { resolve({ ok: false, status: r.status, message: String(r.status) }); });
      }).catch(function () {
        if (keepalive) { return; }
        attempt += 1;
        var wait = Math.min(15000, 500 * Math.pow(2, attempt));
        show("Connection lost: your answer is kept and will be sent again in " +
          Math.round(wait / 1000) + " s.", "warn");
        sleep(wait).then(again);
      });
    })();
  });
}

export function skip() {
  if (S.submitting) { return; }
  S.submitting = true;
  clearTimeout(S.saveTimer);
  api("POST", "/v1/review/leases/" + S.lease + "/skip").then(function (r) {
    if (r.ok) { advance(); return; }
    S.submitting = false;
    if (r.status === 409 || r.status === 404) { expired(); }
  }, function () { S.submitting = false; show("Could not skip: the connection is down.", "warn"); });
}
