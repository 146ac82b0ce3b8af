// The reviewers' task page: hotkeys, lease heartbeats, draft autosave, a submit that survives
// network blips, and the next task preloaded in the background. Hand-written, no build step;
// the page works without it (the rubric is a plain form).
(function () {
  "use strict";

  var main, form, banner, saveState, dims, steps, current, step, lease, queue, csrf;
  var heartbeatTimer = null, saveTimer = null, submitting = false, leaving = false;
  var next = null; // {lease_id, html} of the preloaded next task, or {none: true}
  var preloading = null; // the promise of the preload under way
  var DRAFT_DEBOUNCE_MS = 700;

  function $(sel, root) { return (root || document).querySelector(sel); }
  function $$(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }

  function api(method, path, body, headers) {
    var h = { "X-CSRF-Token": csrf, "Accept": "application/json" };
    if (body !== undefined) { h["Content-Type"] = "application/json"; }
    for (var k in headers || {}) { h[k] = headers[k]; }
    return fetch(path, {
      method: method, headers: h, credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  }

  function sleep(ms) { return new Promise(function (r) { setTimeout(r, ms); }); }

  function show(message, kind) {
    banner.textContent = message;
    banner.className = "banner " + (kind || "info");
    banner.hidden = false;
  }

  function status(text) { if (saveState) { saveState.textContent = text; } }

  // --- the answer ----------------------------------------------------------------------------

  function typed(fieldset, raw) {
    return fieldset.dataset.type === "score" ? Number(raw) : raw;
  }

  function answer() {
    var values = {}, perStep = [];
    $$("fieldset.dim", form).forEach(function (fs) {
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
    var comment = $("#comment", form);
    var out = { values: values, comment: comment && comment.value ? comment.value : null };
    if ($(".per-step", form)) { out.steps = perStep; }
    return out;
  }

  function missing() {
    return $$("fieldset.dim", form).filter(function (fs) {
      return !fs.querySelector("input[type=radio]:checked");
    });
  }

  function backupKey() { return "review-draft:" + lease; }

  function restoreBackup() {
    // A draft kept in this browser when the server could not be reached: put it back.
    var kept = null;
    try { kept = JSON.parse(localStorage.getItem(backupKey()) || "null"); } catch (e) { kept = null; }
    if (!kept) { return; }
    $$("fieldset.dim", form).forEach(function (fs) {
      var v = fs.dataset.step === undefined ? kept.values[fs.dataset.dim]
        : ((kept.steps || [])[Number(fs.dataset.step)] || {})[fs.dataset.dim];
      if (v === undefined) { return; }
      $$("input[type=radio]", fs).forEach(function (r) { if (r.value === String(v)) { r.checked = true; } });
    });
    var comment = $("#comment", form);
    if (comment && kept.comment && !comment.value) { comment.value = kept.comment; }
  }

  function scheduleSave() {
    try { localStorage.setItem(backupKey(), JSON.stringify(answer())); } catch (e) { /* full */ }
    clearTimeout(saveTimer);
    status("Unsaved changes");
    saveTimer = setTimeout(saveDraft, DRAFT_DEBOUNCE_MS);
  }

  function saveDraft() {
    if (submitting) { return Promise.resolve(); }
    return api("PUT", "/v1/review/leases/" + lease + "/draft", { draft: answer() }).then(function (r) {
      if (r.ok) { status("Draft saved"); return; }
      if (r.status === 409 || r.status === 404) { expired(); return; }
      status("Draft not saved (" + r.status + "); kept in this browser");
    }, function () {
      status("Offline: draft kept in this browser, saving again soon");
      saveTimer = setTimeout(saveDraft, 3000);
    });
  }

  // --- lease --------------------------------------------------------------------------------

  function expired() {
    if (leaving) { return; }
    clearInterval(heartbeatTimer);
    $$("input, textarea, button", form).forEach(function (el) { el.disabled = true; });
    show("Your hold on this task expired, so it went back to the queue and your answer was not " +
      "recorded. Take the next task to go on.", "error");
    var go = document.createElement("a");
    go.href = "/review/" + encodeURIComponent(queue);
    go.className = "button";
    go.textContent = "Take the next task";
    banner.appendChild(document.createTextNode(" "));
    banner.appendChild(go);
    go.focus();
    $("#lease-state").textContent = "Hold expired";
  }

  function heartbeat() {
    var ids = [lease];
    if (next && next.lease_id) { ids.push(next.lease_id); }
    ids.forEach(function (id) {
      api("POST", "/v1/review/leases/" + id + "/heartbeat").then(function (r) {
        if (id !== lease) {
          if (!r.ok && next && next.lease_id === id) { next = null; }
          return;
        }
        if (r.status === 409 || r.status === 404) { expired(); return; }
        if (r.ok) {
          r.json().then(function (b) {
            var at = new Date(b.expires_at || b);
            if (!isNaN(at)) {
              $("#lease-state").textContent = "Held until " + at.toISOString().slice(11, 19) + " UTC";
            }
          }, function () { /* no body */ });
        }
      }, function () { status("Connection lost: retrying"); });
    });
  }

  // --- the next task, preloaded ----------------------------------------------------------------

  function preload() {
    if (preloading) { return; }
    preloading = api("POST", "/v1/review/queues/" + encodeURIComponent(queue) + "/next").then(function (r) {
      if (r.status === 204) { next = { none: true }; return null; }
      if (!r.ok) { return null; }
      return r.json().then(function (view) {
        next = { lease_id: view.lease_id };
        return fetch("/review/leases/" + view.lease_id, { credentials: "same-origin" })
          .then(function (page) { return page.ok ? page.text() : null; })
          .then(function (html) {
            if (html && next && next.lease_id === view.lease_id) {
              next.html = html;
              main.dataset.next = "ready";
            }
          });
      });
    }).catch(function () { next = null; });
  }

  function releaseNext() {
    if (next && next.lease_id) {
      fetch("/v1/review/leases/" + next.lease_id + "/release", {
        method: "POST", keepalive: true, credentials: "same-origin",
        headers: { "X-CSRF-Token": csrf },
      }).catch(function () { /* it expires on its own */ });
      next = null;
    }
  }

  function advance() {
    leaving = true;
    if (preloading && !(next && (next.html || next.none))) {
      // Submitted before the next task finished loading: wait for it a moment.
      var pending = preloading;
      preloading = null;
      Promise.race([pending, sleep(3000)]).then(advance, advance);
      return;
    }
    clearInterval(heartbeatTimer);
    try { localStorage.removeItem(backupKey()); } catch (e) { /* private mode */ }
    if (next && next.html) {
      var doc = new DOMParser().parseFromString(next.html, "text/html");
      var url = "/review/leases/" + next.lease_id;
      next = null;
      document.title = doc.title;
      document.body.replaceWith(document.adoptNode(doc.body));
      history.pushState(null, "", url);
      init();
      return;
    }
    var target = next && next.lease_id ? "/review/leases/" + next.lease_id : "/review/" + encodeURIComponent(queue);
    next = null;
    location.assign(target);
  }

  // --- submit and skip ----------------------------------------------------------------------

  function submit() {
    if (submitting) { return; }
    var gaps = missing();
    if (gaps.length) {
      focusDim(dims.indexOf(gaps[0]) >= 0 ? dims.indexOf(gaps[0]) : 0, gaps[0]);
      show("Answer “" + gaps[0].dataset.dim + "”" +
        (gaps[0].dataset.step !== undefined ? " for step " + (Number(gaps[0].dataset.step) + 1) : "") +
        " first.", "error");
      return;
    }
    submitting = true;
    clearTimeout(saveTimer);
    var body = answer();
    var key = form.elements.submit_key.value; // one key per answer: a retry records it once
    $("#submit").disabled = true;
    status("Submitting…");
    var attempt = 0;
    (function send() {
      api("POST", "/v1/review/leases/" + lease + "/submit", body, { "Idempotency-Key": key })
        .then(function (r) {
          if (r.ok) { status("Submitted"); advance(); return; }
          if (r.status >= 500 || r.status === 429) { throw new Error("retry"); }
          submitting = false;
          $("#submit").disabled = false;
          if (r.status === 409 || r.status === 404) { expired(); return; }
          return r.json().then(function (b) {
            show("Not recorded: " + (b.message || r.status) + (b.hint ? " (" + b.hint + ")" : ""), "error");
          }, function () { show("Not recorded (" + r.status + ").", "error"); });
        })
        .catch(function () {
          attempt += 1;
          var wait = Math.min(15000, 500 * Math.pow(2, attempt));
          show("Connection lost: your answer is kept and will be sent again in " +
            Math.round(wait / 1000) + " s.", "warn");
          sleep(wait).then(send);
        });
    })();
  }

  function skip() {
    if (submitting) { return; }
    submitting = true;
    clearTimeout(saveTimer);
    api("POST", "/v1/review/leases/" + lease + "/skip").then(function (r) {
      if (r.ok) { advance(); return; }
      submitting = false;
      if (r.status === 409 || r.status === 404) { expired(); }
    }, function () { submitting = false; show("Could not skip: the connection is down.", "warn"); });
  }

  // --- dimensions and steps -------------------------------------------------------------------

  function visibleDims() {
    return $$("fieldset.dim", form).filter(function (fs) {
      return fs.dataset.step === undefined || Number(fs.dataset.step) === step;
    });
  }

  function focusDim(i, fs) {
    dims = visibleDims();
    if (fs && fs.dataset.step !== undefined && Number(fs.dataset.step) !== step) {
      showStep(Number(fs.dataset.step));
      i = dims.indexOf(fs);
    }
    current = Math.max(0, Math.min(dims.length - 1, i));
    dims.forEach(function (d, j) { d.classList.toggle("current", j === current); });
    var target = dims[current];
    if (!target) { return; }
    var radio = target.querySelector("input:checked") || target.querySelector("input[type=radio]");
    if (radio) { radio.focus({ preventScroll: true }); }
    target.scrollIntoView({ block: "nearest" });
  }

  function showStep(i) {
    var n = Number(main.dataset.steps || 0);
    if (!n) { return; }
    step = Math.max(0, Math.min(n - 1, i));
    $$("section.step").forEach(function (s) { s.hidden = Number(s.dataset.step) !== step; });
    $$(".stepdims", form).forEach(function (s) { s.hidden = Number(s.dataset.step) !== step; });
    $$(".steplink").forEach(function (a) {
      var on = Number(a.dataset.step) === step;
      a.classList.toggle("on", on);
      if (on) { a.setAttribute("aria-current", "step"); } else { a.removeAttribute("aria-current"); }
    });
    $("#step-of").textContent = "Step " + (step + 1) + " of " + n;
    dims = visibleDims();
  }

  function pick(n) {
    var fs = dims[current];
    if (!fs) { return; }
    var radios = $$("input[type=radio]", fs);
    if (n > radios.length) { return; }
    radios[n - 1].checked = true;
    fs.classList.add("answered");
    scheduleSave();
    if (current < dims.length - 1) { focusDim(current + 1); } else { radios[n - 1].focus(); }
  }

  function typing(el) {
    if (!el) { return false; }
    var tag = el.tagName;
    if (tag === "TEXTAREA" || el.isContentEditable) { return true; }
    return tag === "INPUT" && !/^(radio|checkbox|button|submit|reset)$/i.test(el.type);
  }

  function toggleHelp() {
    var d = $("#shortcuts");
    if (d.open) { d.close(); } else { d.showModal(); }
  }

  function onKey(e) {
    if (!form || leaving) { return; }
    if ((e.ctrlKey || e.metaKey) && e.key === "Enter") { e.preventDefault(); submit(); return; }
    if (typing(e.target) || e.altKey || e.ctrlKey || e.metaKey) { return; }
    if ($("#shortcuts").open) {
      if (e.key === "?") { e.preventDefault(); toggleHelp(); }
      return;
    }
    if (/^[1-9]$/.test(e.key)) { e.preventDefault(); pick(Number(e.key)); }
    else if (e.key === "ArrowDown") { e.preventDefault(); focusDim(current + 1); }
    else if (e.key === "ArrowUp") { e.preventDefault(); focusDim(current - 1); }
    else if (e.key === "ArrowRight") { e.preventDefault(); showStep(step + 1); focusDim(0); }
    else if (e.key === "ArrowLeft") { e.preventDefault(); showStep(step - 1); focusDim(0); }
    else if (e.key === "s") { e.preventDefault(); skip(); }
    else if (e.key === "?") { e.preventDefault(); toggleHelp(); }
  }

  // --- start ----------------------------------------------------------------------------------

  function init() {
    main = $("main.task-layout");
    form = $("#answer");
    if (!main || !form) { return; }
    banner = $("#banner");
    saveState = $("#save-state");
    csrf = $("meta[name=csrf-token]").content;
    lease = main.dataset.lease;
    queue = main.dataset.queue;
    submitting = false; leaving = false; next = null; preloading = null;
    step = 0; current = 0;
    restoreBackup();
    $$("fieldset.dim", form).forEach(function (fs) {
      if (fs.querySelector("input:checked")) { fs.classList.add("answered"); }
    });
    showStep(0);
    dims = visibleDims();
    form.addEventListener("change", function (e) {
      var fs = e.target.closest("fieldset.dim");
      if (fs) { fs.classList.add("answered"); }
      scheduleSave();
    });
    form.addEventListener("input", function (e) { if (e.target.id === "comment") { scheduleSave(); } });
    form.addEventListener("focusin", function (e) {
      var fs = e.target.closest("fieldset.dim");
      var i = dims.indexOf(fs);
      if (i >= 0 && i !== current) {
        current = i;
        dims.forEach(function (d, j) { d.classList.toggle("current", j === current); });
      }
    });
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      if (e.submitter && e.submitter.id === "skip") { skip(); } else { submit(); }
    });
    $$(".steplink").forEach(function (a) {
      a.addEventListener("click", function (e) { e.preventDefault(); showStep(Number(a.dataset.step)); focusDim(0); });
    });
    var prev = $("#prev-step"), nxt = $("#next-step");
    if (prev) { prev.addEventListener("click", function () { showStep(step - 1); }); }
    if (nxt) { nxt.addEventListener("click", function () { showStep(step + 1); }); }
    $("#show-shortcuts").addEventListener("click", toggleHelp);
    var period = Math.max(1, Number(main.dataset.heartbeatS) || 30) * 1000;
    heartbeatTimer = setInterval(heartbeat, period);
    focusDim(0);
    // Preload once the page is idle: the reviewer's first keystrokes come first.
    setTimeout(preload, 100);
  }

  document.addEventListener("keydown", onKey, true);
  window.addEventListener("pagehide", function () { if (!leaving) { releaseNext(); } });
  window.addEventListener("popstate", function () { location.reload(); });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
