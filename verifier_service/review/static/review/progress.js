// Progress in this session (done, left, about how long) and times shown in local time.

import { $, $$, localTime } from "./state.js";

export function sessionKey(q) { return "review-session:" + q; }

export function counted(held) {
  var k = sessionKey(held.queue), s = null;
  try { s = JSON.parse(sessionStorage.getItem(k) || "null"); } catch (e) { s = null; }
  s = s || { done: 0, since: Date.now() };
  s.done += 1;
  try { sessionStorage.setItem(k, JSON.stringify(s)); } catch (e) { /* private mode */ }
  progress();
}

export function progress() {
  var el = $("#progress");
  if (!el) { return; }
  var s = null;
  try { s = JSON.parse(sessionStorage.getItem(sessionKey(el.dataset.queue)) || "null"); } catch (e) { s = null; }
  var done = s ? s.done : 0;
  var left = Number(el.dataset.left || 0);
  var text = done + " done · " + left + " left";
  if (done > 0 && left > 0) {
    var each = (Date.now() - s.since) / done;
    var mins = Math.max(1, Math.round(left * each / 60000));
    text += " · about " + mins + " min";
  }
  el.textContent = text;
  el.title = "This session: " + done + " answered; " + left + " more waiting for you in " + el.dataset.queue;
}

export function localTimes() {
  // Times are sent in UTC; the reviewer reads them in her own time zone.
  $$("time[datetime].local").forEach(function (t) {
    var at = new Date(t.getAttribute("datetime"));
    if (!isNaN(at)) { t.title = t.textContent; t.textContent = localTime(at); }
  });
}
