// The rubric's dimensions and a trajectory's steps: which one has focus, picking with 1-9,
// and the page's hotkeys.

import { scheduleSave } from "./draft.js";
import { S, $, $$ } from "./state.js";
import { skip, submit } from "./submit.js";
import { undo } from "./undo.js";

export function visibleDims() {
  return $$("fieldset.dim", S.form).filter(function (fs) {
    return fs.dataset.step === undefined || Number(fs.dataset.step) === S.step;
  });
}

export function focusDim(i, fs) {
  S.dims = visibleDims();
  if (fs && fs.dataset.step !== undefined && Number(fs.dataset.step) !== S.step) {
    showStep(Number(fs.dataset.step));
    i = S.dims.indexOf(fs);
  }
  S.current = Math.max(0, Math.min(S.dims.length - 1, i));
  S.dims.forEach(function (d, j) { d.classList.toggle("current", j === S.current); });
  var target = S.dims[S.current];
  if (!target) { return; }
  var radio = target.querySelector("input:checked") || target.querySelector("input[type=radio]");
  if (radio) { radio.focus({ preventScroll: true }); }
  target.scrollIntoView({ block: "nearest" });
}

export function showStep(i) {
  var n = Number(S.main.dataset.steps || 0);
  if (!n) { return; }
  S.step = Math.max(0, Math.min(n - 1, i));
  $$("section.step").forEach(function (s) { s.hidden = Number(s.dataset.step) !== S.step; });
  $$(".stepdims", S.form).forEach(function (s) { s.hidden = Number(s.dataset.step) !== S.step; });
  $$(".steplink").forEach(function (a) {
    var on = Number(a.dataset.step) === S.step;
    a.classList.toggle("on", on);
    if (on) { a.setAttribute("aria-current", "step"); } else { a.removeAttribute("aria-current"); }
  });
  $("#step-of").textContent = "Step " + (S.step + 1) + " of " + n;
  S.dims = visibleDims();
}

export function pick(n) {
  var fs = S.dims[S.current];
  if (!fs) { return; }
  var radios = $$("input[type=radio]", fs);
  if (n > radios.length) { return; }
  radios[n - 1].checked = true;
  fs.classList.add("answered");
  scheduleSave();
  var after = S.dims[S.current + 1];
  var n2 = Number(S.main.dataset.steps || 0);
  if (fs.dataset.step !== undefined && (!after || after.dataset.step === undefined) && S.step < n2 - 1) {
    // a step's last dimension answered: on to the next step's first
    showStep(S.step + 1);
    focusDim(0);
  } else if (S.current < S.dims.length - 1) { focusDim(S.current + 1); } else { radios[n - 1].focus(); }
}

export function typing(el) {
  if (!el) { return false; }
  var tag = el.tagName;
  if (tag === "TEXTAREA" || el.isContentEditable) { return true; }
  return tag === "INPUT" && !/^(radio|checkbox|button|submit|reset)$/i.test(el.type);
}

export function toggleHelp() {
  var d = $("#shortcuts");
  if (d.open) { d.close(); } else { d.showModal(); }
}

export function onKey(e) {
  if (S.pending && (e.key === "z" || ((e.ctrlKey || e.metaKey) && e.key === "z")) && !typing(e.target)) {
    e.preventDefault(); undo(); return;
  }
  if (!S.form || S.leaving) { return; }
  if ((e.ctrlKey || e.metaKey) && e.key === "Enter") { e.preventDefault(); submit(); return; }
  if (typing(e.target) || e.altKey || e.ctrlKey || e.metaKey) { return; }
  if ($("#shortcuts").open) {
    if (e.key === "?") { e.preventDefault(); toggleHelp(); }
    return;
  }
  if (/^[1-9]$/.test(e.key)) { e.preventDefault(); pick(Number(e.key)); }
  else if (e.key === "ArrowDown") { e.preventDefault(); focusDim(S.current + 1); }
  else if (e.key === "ArrowUp") { e.preventDefault(); focusDim(S.current - 1); }
  else if (e.key === "ArrowRight") { e.preventDefault(); showStep(S.step + 1); focusDim(0); }
  else if (e.key === "ArrowLeft") { e.preventDefault(); showStep(S.step - 1); focusDim(0); }
  else if (e.key === "s") { e.preventDefault(); skip(); }
  else if (e.key === "?") { e.preventDefault(); toggleHelp(); }
}
