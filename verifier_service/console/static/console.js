// The operators' console: fetch the service's own JSON and draw tables and small SVG charts.
// Everything from the server goes in as text (textContent), never as markup.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const PALETTE = ["#1f5fbf", "#2e9d6b", "#d08a16", "#b8434e", "#7453b5", "#3a8fa8", "#8a8f98"];
const STATUS_COLOURS = { scored: "#2e9d6b", pending: "#d08a16", infra_error: "#b8434e" };

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
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
  const bar = el("div", { class: "hbar", title: fmt.pct(share) });
  bar.style.width = `${Math.max(0, Math.min(1, share)) * 100}%`;
  if (colour) bar.style.background = colour;
  cell.append(bar);
  return cell;
}

function legend(entries) {
  const box = el("div", { class: "legend" });
  for (const [label, colour] of entries) {
    const item = el("span");
    const sw = el("span", { class: "swatch" });
    sw.style.background = colour;
    item.append(sw, document.createTextNode(label));
    box.append(item);
  }
  return box;
}

// Stacked columns: items per bin (a minute, or `bin_minutes` on longer windows), one colour
// per kind, over the whole window.
function drawRate(box, data) {
  box.replaceChildren();
  const bin = data.bin_minutes || 1;
  const unit = bin === 1 ? "minute" : bin === 60 ? "hour" : `${bin} minutes`;
  const heading = document.getElementById("h-rate");
  if (heading) heading.textContent = `Items per ${unit}, by kind`;
  const kinds = [...new Set(data.items_per_minute.map((r) => r.kind))].sort();
  if (kinds.length === 0) {
    box.append(el("p", { class: "empty" }, "No items in this window."));
    return;
  }
  const W = 1000, H = 180, L = 40, B = 22, T = 8;
  const since = Date.parse(data.since), now = Date.parse(data.now);
  const perMinute = new Map();
  for (const r of data.items_per_minute) {
    const t = Date.parse(r.minute);
    if (!perMinute.has(t)) perMinute.set(t, {});
    perMinute.get(t)[r.kind] = r.items;
  }
  const max = Math.max(...[...perMinute.values()].map((m) => Object.values(m).reduce((a, b) => a + b, 0)));
  const bins = Math.max(1, (now - since) / 60000 / bin);
  const colW = Math.max(1.5, (W - L) / bins - 0.5);
  const x = (t) => L + ((Math.max(t, since) - since) / (now - since)) * (W - L - colW);
  const y = (v) => T + (H - T - B) * (1 - v / max);
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": `Items per ${unit} by kind; at most ${max} in one ${unit}` });
  chart.append(svg("line", { class: "axis", x1: L, x2: W, y1: H - B, y2: H - B }));
  for (const v of [0, max / 2, max]) {
    chart.append(svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, fmt.units(v)));
    chart.append(svg("line", { class: "axis", x1: L, x2: W, y1: y(v), y2: y(v), "stroke-dasharray": "2 4" }));
  }
  for (const [t, counts] of perMinute) {
    let base = 0;
    kinds.forEach((kind, i) => {
      const n = counts[kind] || 0;
      if (n === 0) return;
      const rect = svg("rect", { x: x(t), y: y(base + n), width: colW, height: y(base) - y(base + n),
        fill: PALETTE[i % PALETTE.length] });
      const at = new Date(t).toISOString().slice(bin === 1 ? 11 : 5, 16).replace("T", " ");
      rect.append(svg("title", {}, `${at} UTC · ${kind}: ${n}`));
      chart.append(rect);
      base += n;
    });
  }
  for (const t of [since, (since + now) / 2, now]) {
    const d = new Date(t);
    const label = data.window === "7d" ? d.toISOString().slice(5, 10) : d.toISOString().slice(11, 16);
    chart.append(svg("text", { x: Math.min(W - 20, Math.max(L, x(t))), y: H - 6, "text-anchor": "middle" }, label));
  }
  box.append(chart, legend(kinds.map((k, i) => [k, PALETTE[i % PALETTE.length]])));
}

// A donut of rewards by status.
function drawRewards(box, statuses) {
  box.replaceChildren();
  const entries = Object.entries(statuses).filter(([, n]) => n > 0);
  const total = entries.reduce((a, [, n]) => a + n, 0);
  if (total === 0) {
    box.append(el("p", { class: "empty" }, "No rewards in this window."));
    return;
  }
  const chart = svg("svg", { viewBox: "0 0 200 130", role: "img",
    "aria-label": entries.map(([s, n]) => `${s} ${n}`).join(", ") });
  const R = 50, r = 32, cx = 65, cy = 65;
  let angle = -Math.PI / 2;
  entries.forEach(([status, n], i) => {
    const colour = STATUS_COLOURS[status] || PALETTE[(i + 4) % PALETTE.length];
    const sweep = (n / total) * 2 * Math.PI;
    if (entries.length === 1) {
      chart.append(svg("circle", { cx, cy, r: (R + r) / 2, fill: "none", stroke: colour, "stroke-width": R - r }));
    } else {
      const a2 = angle + sweep, big = sweep > Math.PI ? 1 : 0;
      const p = (rad, a) => `${cx + rad * Math.cos(a)} ${cy + rad * Math.sin(a)}`;
      const path = svg("path", { fill: colour,
        d: `M ${p(R, angle)} A ${R} ${R} 0 ${big} 1 ${p(R, a2)} L ${p(r, a2)} A ${r} ${r} 0 ${big} 0 ${p(r, angle)} Z` });
      path.append(svg("title", {}, `${status}: ${n}`));
      chart.append(path);
      angle = a2;
    }
    chart.append(svg("rect", { x: 132, y: 30 + i * 18, width: 10, height: 10, rx: 2, fill: colour }));
    chart.append(svg("text", { x: 147, y: 39 + i * 18 }, `${status}`));
  });
  chart.append(svg("text", { x: cx, y: cy + 5, "text-anchor": "middle", style: "font-size:15px;font-weight:700;fill:#1d2430" }, fmt.int(total)));
  box.append(chart);
}

function render(data) {
  const statuses = data.rewards_by_status;
  setText("kpi-items", fmt.int(data.items));
  setText("kpi-scored", fmt.int(statuses.scored || 0));
  setText("kpi-infra", fmt.int(statuses.infra_error || 0));
  setText("kpi-cache", fmt.pct(data.cache_hit_rate));
  setText("kpi-cost", fmt.units(data.total_cost_units));
  setText("kpi-oldest", data.oldest_waiting_s === null ? "none" : fmt.secs(data.oldest_waiting_s));
  drawRate(document.getElementById("chart-rate"), data);
  drawRewards(document.getElementById("chart-rewards"), statuses);
  fillTable("rewards", Object.entries(statuses).map(([s, n]) => [td(s), td(fmt.int(n), "num")]));
  const total = data.total_cost_units || 0;
  fillTable("tiers", data.tiers.map((t) => [
    td(t.tier), td(fmt.int(t.verdicts), "num"), td(fmt.int(t.cached), "num"),
    td(fmt.secs(t.p50_s), "num"), td(fmt.secs(t.p95_s), "num"), td(fmt.units(t.cost_units), "num"),
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
