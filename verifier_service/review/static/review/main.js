// The reviewers' task page: hotkeys, lease heartbeats, draft autosave, a submit that survives
// network blips, the next task preloaded in the background, undo of the last answer (it is
// sent only when its undo window ends), progress in this session and times in local time.
// Hand-written ES modules, no build step; the page works without them (the rubric is a plain
// form). This one starts the page; the others hold one subject each.

import { restoreBackup, scheduleSave } from "./draft.js";
import { focusDim, onKey, showStep, toggleHelp, visibleDims } from "./keys.js";
import { giveBackThen, heartbeat, preload, releaseNext } from "./lease.js";
import { localTimes, progress } from "./progress.js";
import { S, $, $$ } from "./state.js";
import { skip, submit } from "./submit.js";
import { dropPending, flush, watchPending } from "./undo.js";

export function init() {
  S.main = $("main.task-layout");
  S.form = $("#answer");
  S.lease = S.main ? S.main.dataset.lease : null;
  var meta = $("meta[name=csrf-token]");
  S.csrf = meta ? meta.content : S.csrf;
  localTimes();
  progress();
  watchPending();
  if (!S.main || !S.form) { return; }
  S.banner = $("#banner");
  S.saveState = $("#save-state");
  S.queue = S.main.dataset.queue;
  S.submitting = false; S.leaving = false; S.next = null; S.preloading = null;
  S.step = 0; S.current = 0;
  restoreBackup();
  $$("fieldset.dim", S.form).forEach(function (fs) {
    if (fs.querySelector("input:checked")) { fs.classList.add("answered"); }
  });
  showStep(0);
  S.dims = visibleDims();
  S.form.addEventListener("change", function (e) {
    var fs = e.target.closest("fieldset.dim");
    if (fs) { fs.classList.add("answered"); }
    scheduleSave();
  });
  S.form.addEventListener("input", function (e) { if (e.target.id === "comment") { scheduleSave(); } });
  S.form.addEventListener("focusin", function (e) {
    var fs = e.target.closest("fieldset.dim");
    var i = S.dims.indexOf(fs);
    if (i >= 0 && i !== S.current) {
      S.current = i;
      S.dims.forEach(function (d, j) { d.classList.toggle("current", j === S.current); });
    }
  });
  S.form.addEventListener("submit", function (e) {
    e.preventDefault();
    if (e.submitter && e.submitter.id === "skip") { skip(); } else { submit(); }
  });
  $$(".steplink").forEach(function (a) {
    a.addEventListener("click", function (e) { e.preventDefault(); showStep(Number(a.dataset.step)); focusDim(0); });
  });
  var prev = $("#prev-step"), nxt = $("#next-step");
  if (prev) { prev.addEventListener("click", function () { showStep(S.step - 1); }); }
  if (nxt) { nxt.addEventListener("click", function () { showStep(S.step + 1); }); }
  $("#show-shortcuts").addEventListener("click", toggleHelp);
  var period = Math.max(1, Number(S.main.dataset.heartbeatS) || 30) * 1000;
  S.heartbeatTimer = setInterval(heartbeat, period);
  focusDim(0);
  // Preload once the page is idle: the reviewer's first keystrokes come first.
  setTimeout(preload, 100);
}

document.addEventListener("keydown", onKey, true);
window.addEventListener("pagehide", function () {
  if (!S.leaving) { releaseNext(); }
  flush(true); // leaving the review pages: the waiting answer is sent now
});
window.addEventListener("popstate", function () {
  if (S.pending && location.pathname === "/review/leases/" + S.pending.lease) {
    // Back to the task just answered: an undo (the task on screen goes back to the queue)
    var held = S.pending;
    dropPending();
    S.leaving = true;
    giveBackThen(held, function () { location.reload(); });
    return;
  }
  location.reload();
});
if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", init);
} else {
  init();
}
