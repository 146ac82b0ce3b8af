// The operators' console: fetch the service's own JSON and draw its tables and its charts
// (Chart.js, vendored).
// Everything from the server goes in as text (textContent), never as markup.

(() => {
  "use strict";

  const PALETTE = ["#1f5fbf", "#2e9d6b", "#d08a16", "#b8434e", "#7453b5", "#3a8fa8", "#8a8f98"];
  const STATUS_COLOURS = { scored: "#2e9d6b", pending: "#d08a16", infra_error: "#b8434e" };

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  const fmt = {
    int: (n) => Number(n).toLocaleString("en-US"),
    units: (n) => Number(n).toLocaleString("en-US", { maximumFractionDigits: 3 }),
    pct: (x) => (x === null || x === undefined ? "–" : (100 * x).toFixed(1) + "%"),
    secs: (s) => {
      if (s === null || s === undefined) return "–";
      if (s < 1) return (1000 * s).toFixed(1) + " ms";
      if (s < 120) return s.toFixed(1) + " s";
      if (s < 7200) return (s / 60).toFixed(1) + " min";
      return (s / 3600).toFixed(1) + " h";
    },
  };

  function setText(id, text) {
    document.getElementById(id).textContent = text;
  }

  function fillTable(id, rows) {
    const body = document.querySelector(`#${id} tbody`);
    body.replaceChildren();
    if (rows.length === 0) {
      const cols = document.querySelectorAll(`#${id} thead th`).length;
      const tr = el("tr");
      tr.append(el("td", { colspan: String(cols), class: "empty" }, "Nothing in this window."));
      body.append(tr);
      return;
    }
    for (const cells of rows) {
      const tr = el("tr");
      for (const cell of cells) tr.append(cell);
      body.append(tr);
    }
  }

  const td = (text, cls) => el("td", cls ? { class: cls } : {}, text);

  function barCell(share, colour, label) {
    const cell = el("td", { class: "bar-cell" });
    if (label !== undefined) cell.append(el("span", { class: "bar-label" }, label));
    // The bar in a track of its own: its length is `share` of the track, whatever the label.
    const track = el("span", { class: "bar-track" });
    const bar = el("span", { class: "hbar", title: fmt.pct(share) });
    bar.style.width = `${Math.max(0, Math.min(1, share)) * 100}%`;
    if (colour) bar.style.background = colour;
    track.append(bar);
    cell.append(track);
    return cell;
  }

  // A Chart.js chart (the vendored one) in `box`, replacing what was there; its text alternative
  // is the canvas's aria-label.
  function chartIn(box, label, config) {
    const old = box.querySelector("canvas");
    if (old && window.Chart.getChart(old)) window.Chart.getChart(old).destroy();
    box.replaceChildren();
    const canvas = el("canvas", { role: "img", "aria-label": label });
    box.append(canvas);
    config.options = Object.assign({
      animation: false, responsive: true, maintainAspectRatio: false,
      plugins: { legend: { position: "bottom", labels: { boxWidth: 12 } } },
    }, config.options || {});
    return new window.Chart(canvas, config);
  }

  // Stacked columns: items per bin (a minute, or `bin_minutes` on longer windows), one colour
  // per kind, over the whole window (empty bins included).
  function drawRate(box, data) {
    const bin = data.bin_minutes || 1;
    const unit = bin === 1 ? "minute" : bin === 60 ? "hour" : `${bin} minutes`;
    const heading = document.getElementById("h-rate");
    if (heading) heading.textContent = `Items per ${unit}, by kind`;
    const kinds = [...new Set(data.items_per_minute.map((r) => r.kind))].sort();
    if (kinds.length === 0) {
      box.replaceChildren(el("p", { class: "empty" }, "No items in this window."));
      return;
    }
    const step = bin * 60000;
    const start = Math.floor(Date.parse(data.since) / step) * step;
    const bins = Math.max(1, Math.ceil((Date.parse(data.now) - start) / step));
    const counts = new Map(kinds.map((k) => [k, new Array(bins).fill(0)]));
    for (const r of data.items_per_minute) {
      const i = Math.min(bins - 1, Math.max(0, Math.floor((Date.parse(r.minute) - start) / step)));
      counts.get(r.kind)[i] += r.items;
    }
    const labels = [...Array(bins).keys()].map((i) => {
      const at = new Date(start + i * step).toISOString();
      return data.window === "7d" ? at.slice(5, 16).replace("T", " ") : at.slice(11, 16);
    });
    const totals = labels.map((_, i) => kinds.reduce((a, k) => a + counts.get(k)[i], 0));
    const max = Math.max(...totals);
    chartIn(box, `Items per ${unit} by kind; at most ${max} in one ${unit}`, {
      type: "bar",
      data: {
        labels,
        datasets: kinds.map((kind, i) => ({
          label: kind, data: counts.get(kind), backgroundColor: PALETTE[i % PALETTE.length],
        })),
      },
      options: {
        scales: {
          x: { stacked: true, ticks: { maxTicksLimit: 8, maxRotation: 0 }, grid: { display: false } },
          y: { stacked: true, beginAtZero: true, ticks: { precision: 0, maxTicksLimit: 4 } },
        },
        plugins: { tooltip: { callbacks: { title: (items) => `${items[0].label} UTC` } } },
      },
    });
  }

  // A doughnut of rewards by status.
  function drawRewards(box, statuses) {
    const entries = Object.entries(statuses).filter(([, n]) => n > 0);
    if (entries.length === 0) {
      box.replaceChildren(el("p", { class: "empty" }, "No rewards in this window."));
      return;
    }
    chartIn(box, entries.map(([s, n]) => `${s} ${n}`).join(", "), {
      type: "doughnut",
      data: {
        labels: entries.map(([s]) => s),
        datasets: [{
          data: entries.map(([, n]) => n),
          backgroundColor: entries.map(([s], i) => STATUS_COLOURS[s] || PALETTE[(i + 4) % PALETTE.length]),
          borderWidth: 1,
        }],
      },
      options: { cutout: "62%", plugins: { legend: { position: "right" } } },
    });
  }

  function render(data) {
    const statuses = data.rewards_by_status;
    setText("kpi-items", fmt.int(data.items));
    setText("kpi-scored", fmt.int(statuses.scored || 0));
    setText("kpi-infra", fmt.int(statuses.infra_error || 0));
    setText("kpi-cache", fmt.pct(data.cache_hit_rate));
    setText("kpi-cost", fmt.units(data.total_cost_units));
    setText("kpi-oldest", data.oldest_waiting_s === null ? "none" : fmt.secs(data.oldest_waiting_s));
    const waitsFor = document.getElementById("kpi-oldest-for");
    if (waitsFor) waitsFor.textContent = data.oldest_waiting_for ? ` (for ${data.oldest_waiting_for})` : "";
    drawRate(document.getElementById("chart-rate"), data);
    drawRewards(document.getElementById("chart-rewards"), statuses);
    fillTable("rewards", Object.entries(statuses).map(([s, n]) => [td(s), td(fmt.int(n), "num")]));
    const total = data.total_cost_units || 0;
    fillTable("tiers", data.tiers.map((t) => [
      td(t.tier), td(fmt.int(t.verdicts), "num"), td(fmt.int(t.cached), "num"),
      // People's tier: their review time (task opened to answered), not the verdict's ~0 wall.
      ...(t.review_p50_s !== null && t.review_p50_s !== undefined
        ? [td(`${fmt.secs(t.review_p50_s)} review`, "num review-time"),
           td(`${fmt.secs(t.review_p95_s)} review`, "num review-time")]
        : t.tier === "human"
          ? [td("no answer yet", "num"), td("–", "num")]
          : [td(fmt.secs(t.p50_s), "num"), td(fmt.secs(t.p95_s), "num")]),
      td(fmt.units(t.cost_units), "num"),
      barCell(total ? t.cost_units / total : 0),
    ]));
    fillTable("ladder", data.ladder.map((s) => [
      td(s.policy), td(s.kind), td(s.tier), td(fmt.int(s.items), "num"), barCell(s.escalation_rate, "#2e9d6b", fmt.pct(s.escalation_rate)),
    ]));
    fillTable("principals", Object.entries(data.cost_by_principal).map(([p, c]) => [
      td(p), td(fmt.units(c), "num"), barCell(total ? c / total : 0, "#7453b5"),
    ]));
    fillTable("queues", data.queues.map((q) => {
      const workers = td(q.workers === null ? "unknown" : fmt.int(q.workers), "num");
      if (q.workers === 0 && q.depth) workers.classList.add("warn");
      return [td(q.queue), td(q.depth === null ? "unknown" : fmt.int(q.depth), "num"), workers];
    }));
  }

  async function load(main) {
    const status = document.getElementById("status");
    try {
      const response = await fetch(main.dataset.overview, { headers: { Accept: "application/json" } });
      if (!response.ok) throw new Error(`the service answered ${response.status}`);
      const data = await response.json();
      render(data);
      status.classList.remove("alert");
      status.textContent = `From the database, ${new Date(data.since).toISOString().slice(0, 16).replace("T", " ")} to ${new Date(data.now).toISOString().slice(11, 19)} UTC; refreshed every 15 s.`;
      main.dataset.loaded = "true";
    } catch (err) {
      status.classList.add("alert");
      status.textContent = `Could not load the overview: ${err.message}. Retrying.`;
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    const main = document.querySelector("[data-overview]");
    if (!main) return;
    load(main);
    setInterval(() => load(main), 15000);
  });
})();
