// The reviewers' task page: hotkeys, lease heartbeats, draft autosave, a submit that survives
// network blips, the next task preloaded in the background, undo of the last answer (it is
// sent only when its undo window ends), progress in this session and times in local time.
// Hand-written, no build step; the page works without it (the rubric is a plain form).
(function () {
  "use strict";

  var main, form, banner, saveState, dims, steps, current, step, lease, queue, csrf;
  var heartbeatTimer = null, saveTimer = null, submitting = false, leaving = false;
  var next = null; // {lease_id, html} of the preloaded next task, or {none: true}
  var preloading = null; // the promise of the preload under way
  var DRAFT_DEBOUNCE_MS = 700;
  var UNDO_MS = 8000; // an answer can be taken back this long; then it is sent and counts
  var PENDING = "review-pending"; // sessionStorage: the answer waiting out its undo window
  var pending = null, pendingTimer = null, toast = null;

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
    if (pending && pending.lease !== lease) { ids.push(pending.lease); }
    if (next && next.lease_id) { ids.push(next.lease_id); }
    ids.forEach(function (id) {
      api("POST", "/v1/review/leases/" + id + "/heartbeat").then(function (r) {
        if (id !== lease) {
          if (!r.ok && next && next.lease_id === id) { next = null; }
          if (!r.ok && pending && pending.lease === id) { flush(); }
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

  function preload() {
    // Not while leaving the page (an undo, a give-back): a task leased now would stay held
    // by this reviewer with no page showing it.
    if (preloading || leaving) { return; }
    preloading = api("POST", "/v1/review/queues/" + encodeURIComponent(queue) + "/next").then(function (r) {
      if (r.status === 204) { next = { none: true }; return null; }
      if (!r.ok) { return null; }
      return r.json().then(function (view) {
        if (leaving && !submitting) { return releaseLease(view.lease_id); }
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
      var id = next.lease_id;
      next = null;
      return releaseLease(id);
    }
    return Promise.resolve();
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
    if (!(pending && pending.lease === lease)) {
      try { localStorage.removeItem(backupKey()); } catch (e) { /* private mode */ }
    }
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
    // The draft on the server holds the answer too: an undo opens the task with it filled in.
    api("PUT", "/v1/review/leases/" + lease + "/draft", { draft: body }).catch(function () { /* kept locally */ });
    var held = { lease: lease, queue: queue, body: body, key: key };
    readyNext().then(function () {
      if (next && next.html) {
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
        submitting = false;
        $("#submit").disabled = false;
        if (r.status === 409 || r.status === 404) { expired(); return; }
        show("Not recorded: " + r.message, "error");
      });
    });
  }

  function readyNext() {
    if (preloading && !(next && (next.html || next.none))) {
      return Promise.race([preloading, sleep(3000)]).catch(function () { return null; });
    }
    return Promise.resolve();
  }

  // POST an answer until the server says yes or no (network errors and 5xx retried with
  // backoff): {ok, status, message}.
  function send(held, keepalive) {
    var attempt = 0;
    return new Promise(function (resolve) {
      (function again() {
        var h = { "X-CSRF-Token": csrf || held.csrf, "Accept": "application/json",
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

  // --- undo: the last answer waits out its window before it is sent -------------------------

  function keepPending(held) {
    pending = held;
    held.csrf = csrf;
    try { sessionStorage.setItem(PENDING, JSON.stringify(held)); } catch (e) { /* private mode */ }
  }

  function dropPending() {
    pending = null;
    clearInterval(pendingTimer);
    pendingTimer = null;
    try { sessionStorage.removeItem(PENDING); } catch (e) { /* private mode */ }
  }

  function showToast(html) {
    if (!toast || !document.body.contains(toast)) {
      toast = document.createElement("div");
      toast.id = "undo";
      toast.className = "banner undo";
      toast.setAttribute("role", "status");
      document.body.appendChild(toast);
    }
    toast.hidden = false;
    toast.textContent = "";
    toast.appendChild(html);
  }

  function hideToast(after) {
    var t = toast;
    setTimeout(function () { if (t && !pending) { t.hidden = true; } }, after || 0);
  }

  function tick() {
    if (!pending) { return; }
    var left = Math.ceil((pending.until - Date.now()) / 1000);
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

  function watchPending() {
    // On every review page: the answer waiting out its undo window, counted down.
    var kept = null;
    try { kept = JSON.parse(sessionStorage.getItem(PENDING) || "null"); } catch (e) { kept = null; }
    if (!kept) { return; }
    if (kept.lease === lease) {
      // Back (or a reload) on the task just answered: that is an undo.
      dropPending();
      return;
    }
    pending = kept;
    clearInterval(pendingTimer);
    pendingTimer = setInterval(tick, 250);
    tick();
  }

  function flush(keepalive) {
    if (!pending) { return Promise.resolve(); }
    var held = pending;
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
      toast.className = "banner undo error";
    });
  }

  function undo() {
    if (!pending) { return; }
    var held = pending;
    dropPending();
    leaving = true;
    clearInterval(heartbeatTimer);
    // The task on screen goes back to the queue; the answered one opens with its answer.
    giveBackThen(held, function () { location.assign("/review/leases/" + held.lease); });
  }

  // Give back the task on screen and the preloaded one, then go on: the page that opens next
  // preloads its next task at once, and a give-back still in flight (or a preload still
  // leasing a task) would leave that task held by this reviewer: "no more tasks" while it
  // waits in the queue. At most a few seconds.
  function giveBackThen(held, go) {
    var loading = preloading ? Promise.race([preloading, sleep(2000)]) : Promise.resolve();
    loading.then(function () {
      var back = [releaseNext()];
      if (lease && lease !== held.lease) { back.push(releaseLease(lease)); }
      return Promise.race([Promise.all(back), sleep(2000)]);
    }).then(go, go);
  }

  function releaseLease(id) {
    return fetch("/v1/review/leases/" + id + "/release", {
      method: "POST", keepalive: true, credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf },
    }).catch(function () { /* it expires on its own */ });
  }

  // --- progress in this session -----------------------------------------------------------------

  function sessionKey(q) { return "review-session:" + q; }

  function counted(held) {
    var k = sessionKey(held.queue), s = null;
    try { s = JSON.parse(sessionStorage.getItem(k) || "null"); } catch (e) { s = null; }
    s = s || { done: 0, since: Date.now() };
    s.done += 1;
    try { sessionStorage.setItem(k, JSON.stringify(s)); } catch (e) { /* private mode */ }
    progress();
  }

  function progress() {
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

  function localTime(at) {
    return at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  function localTimes() {
    // Times are sent in UTC; the reviewer reads them in her own time zone.
    $$("time[datetime].local").forEach(function (t) {
      var at = new Date(t.getAttribute("datetime"));
      if (!isNaN(at)) { t.title = t.textContent; t.textContent = localTime(at); }
    });
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
    var after = dims[current + 1];
    var n2 = Number(main.dataset.steps || 0);
    if (fs.dataset.step !== undefined && (!after || after.dataset.step === undefined) && step < n2 - 1) {
      // a step's last dimension answered: on to the next step's first
      showStep(step + 1);
      focusDim(0);
    } else if (current < dims.length - 1) { focusDim(current + 1); } else { radios[n - 1].focus(); }
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
    if (pending && (e.key === "z" || ((e.ctrlKey || e.metaKey) && e.key === "z")) && !typing(e.target)) {
      e.preventDefault(); undo(); return;
    }
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
    lease = main ? main.dataset.lease : null;
    var meta = $("meta[name=csrf-token]");
    csrf = meta ? meta.content : csrf;
    localTimes();
    progress();
    watchPending();
    if (!main || !form) { return; }
    banner = $("#banner");
    saveState = $("#save-state");
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
  window.addEventListener("pagehide", function () {
    if (!leaving) { releaseNext(); }
    flush(true); // leaving the review pages: the waiting answer is sent now
  });
  window.addEventListener("popstate", function () {
    if (pending && location.pathname === "/review/leases/" + pending.lease) {
      // Back to the task just answered: an undo (the task on screen goes back to the queue)
      var held = pending;
      dropPending();
      leaving = true;
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
})();
