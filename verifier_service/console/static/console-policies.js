// The console's policy pages: the replay report's tables and charts (Chart.js, vendored) drawn
// from the service's own JSON, and the draft editor's jumps from a problem to its line.
// Everything from the server goes in as text (textContent), never as markup.
"use strict";

(() => {
  const COLOURS = { draft: "#1f5fbf", active: "#8a8f98", up: "#2e9d6b", down: "#b8434e" };

  const num = (x, digits) => (x === null || x === undefined ? "–" : Number(x).toFixed(digits));
  const signed = (x, digits) => (x === null || x === undefined ? "–"
    : (x > 0 ? "+" : "") + Number(x).toFixed(digits));

  function cell(text, cls) {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    return td;
  }

  function fill(id, rows, empty) {
    const body = document.querySelector(`#${id} tbody`);
    body.replaceChildren();
    if (rows.length === 0) {
      const cols = document.querySelectorAll(`#${id} thead th`).length;
      const tr = document.createElement("tr");
      const td = cell(empty, "empty");
      td.colSpan = cols;
      tr.append(td);
      body.append(tr);
      return;
    }
    for (const cells of rows) {
      const tr = document.createElement("tr");
      tr.append(...cells);
      body.append(tr);
    }
  }

  function chart(id, config, label) {
    const canvas = document.getElementById(id);
    const old = window.Chart.getChart(canvas);
    if (old) old.destroy();
    canvas.setAttribute("aria-label", label);
    config.options = Object.assign({
      animation: false, responsive: true, maintainAspectRatio: false,
      plugins: { legend: { position: "bottom" } },
    }, config.options || {});
    return new window.Chart(canvas, config);
  }

  function draw(report, version) {
    const draft = report.draft;
    const active = report.active;
    const set = (id, text) => { document.getElementById(id).textContent = text; };
    set("kpi-items", String(report.items));
    set("kpi-reward-draft", num(draft.mean_reward, 4));
    set("kpi-reward-active", active ? num(active.mean_reward, 4) : "–");
    set("kpi-cost-draft", num(draft.cost_units, 3));
    set("kpi-cost-active", active ? num(active.cost_units, 3) : "–");
    set("kpi-rank", num(report.rank_correlation, 3));

    const tiers = [...new Set([...Object.keys(draft.escalations),
      ...Object.keys(active ? active.escalations : {})])].sort();
    const esc = (side, tier) => (side ? side.escalations[tier] || 0 : null);
    fill("escalations", tiers.map((t) => [
      cell(t), cell(String(esc(draft, t)), "num"),
      cell(active ? String(esc(active, t)) : "–", "num"),
      cell(active ? signed(esc(draft, t) - esc(active, t), 0) : "–", "num"),
    ]), "No item reached a tier.");
    const datasets = [{ label: `v${version}`, data: tiers.map((t) => esc(draft, t)),
      backgroundColor: COLOURS.draft }];
    if (active) {
      datasets.push({ label: `active v${report.active_version}`,
        data: tiers.map((t) => esc(active, t)), backgroundColor: COLOURS.active });
    }
    chart("chart-escalations", { type: "bar", data: { labels: tiers, datasets } },
      tiers.map((t) => `${t}: v${version} ${esc(draft, t)}` +
        (active ? `, active ${esc(active, t)}` : "")).join("; ") || "no escalations");

    const figures = [
      ["Items scored", (s) => String(s.scored)],
      ["Items stopped at a missing verdict", (s) => String(s.unavailable)],
      ["Mean reward", (s) => num(s.mean_reward, 4)],
      ["Cost units", (s) => num(s.cost_units, 3)],
    ];
    fill("totals", figures.map(([name, f]) => [
      cell(name), cell(f(draft), "num"), cell(active ? f(active) : "–", "num"),
    ]), "");
    // Cost per step, in ladder order (the report's own order), as the cost ledger charges it.
    const costs = (side) => (side && side.cost_by_tier) || {};
    const steps = [...new Set([...Object.keys(costs(draft)), ...Object.keys(costs(active))])];
    fill("step-costs", steps.map((t) => [
      cell(t), cell(num(costs(draft)[t] || 0, 3), "num"),
      cell(active ? num(costs(active)[t] || 0, 3) : "–", "num"),
    ]), "No tier was called.");
    const sides = active ? [`v${version}`, `active v${report.active_version}`] : [`v${version}`];
    const colours = [COLOURS.draft, COLOURS.active];
    const pair = (key) => (active ? [draft[key], active[key]] : [draft[key]]);
    chart("chart-cost", { type: "bar", data: { labels: sides, datasets: [
      { label: "cost units", data: pair("cost_units"), backgroundColor: colours }] },
      options: { plugins: { legend: { display: false }, title: { display: true, text: "Cost units" } } } },
      sides.map((s, i) => `${s} ${num(pair("cost_units")[i], 3)}`).join(", "));
    chart("chart-reward", { type: "bar", data: { labels: sides, datasets: [
      { label: "mean reward", data: pair("mean_reward"), backgroundColor: colours }] },
      options: { plugins: { legend: { display: false }, title: { display: true, text: "Mean reward" } },
        scales: { y: { suggestedMin: 0, suggestedMax: 1 } } } },
      sides.map((s, i) => `${s} ${num(pair("mean_reward")[i], 4)}`).join(", "));

    const changed = report.most_changed;
    fill("changed", changed.map((c) => [
      cell(c.job_id), cell(String(c.index), "num"), cell(num(c.active, 4), "num"),
      cell(num(c.draft, 4), "num"), cell(signed(c.delta, 4), "num"),
    ]), "No item's reward changed.");
    const labels = changed.map((c) => `${c.job_id.slice(0, 8)} #${c.index}`);
    const deltas = changed.map((c) => c.delta);
    chart("chart-changed", { type: "bar", data: { labels, datasets: [{
      label: `reward change, v${version} minus active`, data: deltas,
      backgroundColor: deltas.map((d) => (d !== null && d < 0 ? COLOURS.down : COLOURS.up)) }] },
      options: { indexAxis: "y" } },
      changed.map((c, i) => `${labels[i]} ${signed(c.delta, 4)}`).join("; ") || "no change");
  }

  async function loadReplay(main) {
    const status = document.getElementById("status");
    const version = main.dataset.replay.match(/versions\/(\d+)\//)[1];
    try {
      const response = await fetch(main.dataset.replay, { headers: { Accept: "application/json" } });
      const body = await response.json();
      if (!response.ok) throw new Error(body.message || response.statusText);
      draw(body, version);
      status.textContent = `Replayed ${body.items} stored item${body.items === 1 ? "" : "s"}.`;
      main.dataset.loaded = "true";
    } catch (err) {
      status.textContent = `Could not replay: ${err.message}`;
      status.classList.add("alert");
    }
  }

  function goToLine(textarea, line) {
    const lines = textarea.value.split("\n");
    const start = lines.slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0);
    const end = start + (lines[line - 1] || "").length;
    textarea.focus();
    textarea.setSelectionRange(start, end);
    const height = parseFloat(getComputedStyle(textarea).lineHeight) || 18;
    textarea.scrollTop = Math.max(0, (line - 4) * height);
  }

  document.addEventListener("DOMContentLoaded", () => {
    const main = document.querySelector("[data-replay]");
    if (main) loadReplay(main);
    const textarea = document.getElementById("draft-text");
    if (textarea) {
      // A problem's "Line N" link: without scripts it moves focus to the line in the
      // annotated listing; with them, to the line itself in the editor, selected.
      for (const link of document.querySelectorAll("a.goto")) {
        link.addEventListener("click", (event) => {
          event.preventDefault();
          goToLine(textarea, Number(link.dataset.line));
        });
      }
    }
  });
})();
