// The answer on the form: read it, what is missing, the draft saved on the server (debounced)
// and a copy kept in this browser for when the server cannot be reached.

import { expired } from "./lease.js";
import { S, $, $$, DRAFT_DEBOUNCE_MS, api, status } from "./state.js";

export function typed(fieldset, raw) {
  return fieldset.dataset.type === "score" ? Number(raw) : raw;
}

export function answer() {
  var values = {}, perStep = [];
  $$("fieldset.dim", S.form).forEach(function (fs) {
    var picked = fs.querySelector("input[type=radio]:checked");
    if (!picked) { return; }
    var value = typed(fs, picked.value);
    if (fs.dataset.step === undefined) {
      values[fs.dataset.dim] = value;
    } else {
      var i = Number(fs.dataset.step);
      while (perStep.length <= i) { perStep.push({}); }
      perStep[i][fs.dataset.dim] = value;
    }
  });
  var comment = $("#comment", S.form);
  var out = { values: values, comment: comment && comment.value ? comment.value : null };
  if ($(".per-step", S.form)) { out.steps = perStep; }
  return out;
}

export function missing() {
  return $$("fieldset.dim", S.form).filter(function (fs) {
    return !fs.querySelector("input[type=radio]:checked");
  });
}

export function backupKey() { return "review-draft:" + S.lease; }

export function restoreBackup() {
  // A draft kept in this browser when the server could not be reached: put it back.
  var kept = null;
  try { kept = JSON.parse(localStorage.getItem(backupKey()) || "null"); } catch (e) { kept = null; }
  if (!kept) { return; }
  $$("fieldset.dim", S.form).forEach(function (fs) {
    var v = fs.dataset.step === undefined ? kept.values[fs.dataset.dim]
      : ((kept.steps || [])[Number(fs.dataset.step)] || {})[fs.dataset.dim];
    if (v === undefined) { return; }
    $$("input[type=radio]", fs).forEach(function (r) { if (r.value === String(v)) { r.checked = true; } });
  });
  var comment = $("#comment", S.form);
  if (comment && kept.comment && !comment.value) { comment.value = kept.comment; }
}

export function scheduleSave() {
  try { localStorage.setItem(backupKey(), JSON.stringify(answer())); } catch (e) { /* full */ }
  clearTimeout(S.saveTimer);
  status("Unsaved changes");
  S.saveTimer = setTimeout(saveDraft, DRAFT_DEBOUNCE_MS);
}

export function saveDraft() {
  if (S.submitting) { return Promise.resolve(); }
  return api("PUT", "/v1/review/leases/" + S.lease + "/draft", { draft: answer() }).then(function (r) {
    if (r.ok) { status("Draft saved"); return; }
    if (r.status === 409 || r.status === 404) { expired(); return; }
    status("Draft not saved (" + r.status + "); kept in this browser");
  }, function () {
    status("Offline: draft kept in this browser, saving again soon");
    S.saveTimer = setTimeout(saveDraft, 3000);
  });
}
