// The dashboard's three files, served as they are. The script builds every element with
// createElement and textContent: job names, teams and owners come from users, and none of it is
// ever parsed as HTML.
#include "scheduler/daemon/dashboard.h"

namespace ember::sched {

const std::string& dashboard_html() {
  static const std::string page = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ember sched</title>
<link rel="stylesheet" href="/dashboard.css">
</head>
<body>
<header>
  <h1>ember sched</h1>
  <span id="summary">loading…</span>
  <span id="updated" data-ok="false"></span>
</header>
<main>
  <section id="devices-section">
    <h2>Devices</h2>
    <div id="devices" class="grid"></div>
  </section>
  <section id="chart-section">
    <h2>Utilisation and queue</h2>
    <svg id="chart" viewBox="0 0 640 180" role="img" aria-label="utilisation and queue length over time"></svg>
    <div class="legend"><span class="key util"></span>devices busy (%) <span class="key queue"></span>jobs queued</div>
  </section>
  <section id="teams-section" hidden>
    <h2>Teams</h2>
    <div id="teams"></div>
  </section>
  <section id="queue-section">
    <h2>Queue</h2>
    <table id="queue"><thead><tr><th>id</th><th>name</th><th>team</th><th>owner</th><th>devices</th>
      <th>waited</th><th>estimated start</th></tr></thead><tbody></tbody></table>
  </section>
  <section id="jobs-section">
    <h2>Jobs</h2>
    <table id="jobs"><thead><tr><th>id</th><th>name</th><th>team</th><th>owner</th><th>state</th><th>devices</th>
      <th>run time</th><th>epoch</th><th>step</th><th>loss</th><th>samples/s</th></tr></thead><tbody></tbody></table>
  </section>
</main>
<script src="/dashboard.js"></script>
</body>
</html>
)HTML";
  return page;
}

const std::string& dashboard_css() {
  static const std::string css =
      R"CSS(body { font: 14px system-ui, sans-serif; margin: 0; background: #f6f7f9; color: #1d232b; }
header { display: flex; gap: 1.5em; align-items: baseline; padding: 0.6em 1.2em; background: #1d232b; color: #fff; }
header h1 { font-size: 1.2em; margin: 0; }
#updated[data-ok="false"] { color: #ff9d8a; }
main { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 1em; padding: 1em; }
#jobs-section { grid-column: 1 / -1; }
section { overflow-x: auto; background: #fff; border-radius: 6px; padding: 0.6em 1em; box-shadow: 0 1px 2px #0002; }
h2 { font-size: 1em; margin: 0.2em 0 0.6em; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(92px, 1fr)); gap: 6px; }
.device { border-radius: 4px; padding: 6px; min-height: 48px; background: #e4e7eb; font-size: 12px; overflow: hidden; }
.device[data-state="busy"], .device[data-state="stopping"] { color: #fff; }
.device[data-state="stopping"] { opacity: 0.6; }
.device .dev { font-weight: 600; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 3px 6px; border-bottom: 1px solid #e4e7eb; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr[data-state="done"] td { color: #2b7a3d; }
tr[data-state="failed"] td, tr[data-state="cancelled"] td { color: #a23; }
.swatch { display: inline-block; width: 0.8em; height: 0.8em; border-radius: 2px; margin-right: 4px; }
.team { display: grid; grid-template-columns: 9em 1fr 16em; gap: 0.6em; align-items: center; margin: 4px 0; }
.bar { position: relative; height: 14px; background: #e4e7eb; border-radius: 3px; overflow: hidden; }
.bar .used { position: absolute; top: 0; bottom: 0; left: 0; }
.bar .quota { position: absolute; top: 0; bottom: 0; border-left: 2px solid #1d232b; }
#chart { width: 100%; height: auto; }
#chart .axis { stroke: #9aa3ad; stroke-width: 1; }
#chart text { font-size: 10px; fill: #5b6571; }
#chart .util { fill: none; stroke: #2f6fd6; stroke-width: 2; }
#chart .queue { fill: none; stroke: #e07b24; stroke-width: 2; stroke-dasharray: 4 2; }
.legend { font-size: 12px; color: #5b6571; }
.key { display: inline-block; width: 1.6em; height: 0; border-top: 2px solid; margin: 0 4px 3px 10px; }
.key.util { border-color: #2f6fd6; }
.key.queue { border-color: #e07b24; border-top-style: dashed; }
)CSS";
  return css;
}

const std::string& dashboard_js() {
  static const std::string js = R"JS('use strict';
// Polls /api/state and redraws. Everything from the daemon goes into the page as text.
const POLL_MS = 2000;
const CHART_SECONDS = 6 * 3600;  // the chart shows at most the last six hours

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

// A colour per team (or per job without a team), stable across refreshes.
function colour(key) {
  let h = 0;
  for (const c of String(key)) h = (h * 31 + c.codePointAt(0)) >>> 0;
  return 'hsl(' + (h % 360) + ', 55%, 45%)';
}

function duration(s) {
  if (s === null || s === undefined) return '';
  s = Math.max(0, Math.round(s));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  return h > 0 ? h + 'h ' + String(m).padStart(2, '0') + 'm' : m > 0 ? m + 'm ' + String(sec).padStart(2, '0') + 's' : sec + 's';
}

function clock(t) {
  return new Date(t * 1000).toLocaleTimeString([], {hour12: false});
}

function fixed(v, digits) {
  return v === null || v === undefined ? '' : Number(v).toFixed(digits);
}

function renderSummary(s) {
  const busy = s.devices.filter((d) => d.state !== 'free').length;
  const queued = s.jobs.filter((j) => j.state === 'queued').length;
  const running = s.jobs.filter((j) => j.state === 'running').length;
  document.getElementById('summary').textContent = 'policy ' + s.policy + ' · ' + busy + '/' + s.devices.length +
      ' devices busy · ' + running + ' running · ' + queued + ' queued' + (s.draining ? ' · draining' : '');
  const u = document.getElementById('updated');
  u.textContent = 'updated ' + clock(s.now);
  u.dataset.ok = 'true';
}

function renderDevices(s, jobs) {
  const grid = document.getElementById('devices');
  grid.replaceChildren();
  for (const d of s.devices) {
    const j = d.job !== null ? jobs.get(d.job) : undefined;
    const box = el('div', {class: 'device', 'data-name': d.name, 'data-state': d.state});
    box.appendChild(el('div', {class: 'dev'}, d.name + (d.type ? ' · ' + d.type : '')));
    if (d.job !== null) {
      box.dataset.job = d.job;
      const team = j ? j.team : '';
      box.dataset.team = team;
      box.style.background = colour(team || ('job ' + d.job));
      box.appendChild(el('div', {class: 'job'}, '#' + d.job + ' ' + (j ? j.name : '')));
      if (team) box.appendChild(el('div', {class: 'team-name'}, team));
    } else {
      box.appendChild(el('div', {class: 'job'}, 'free'));
    }
    grid.appendChild(box);
  }
}

// Step lines: the daemon records a point whenever the busy devices or the queue change.
function stepPoints(hist, now, t0, x, y, value) {
  const pts = [];
  let last = null;
  for (const p of hist) {
    const t = Math.max(p[0], t0);
    if (last !== null) pts.push(x(t) + ',' + y(last));
    last = value(p);
    pts.push(x(t) + ',' + y(last));
  }
  if (last !== null) pts.push(x(now) + ',' + y(last));
  return pts;
}

function renderChart(s) {
  const chart = document.getElementById('chart');
  chart.replaceChildren();
  const W = 640, H = 180, L = 36, R = 36, T = 10, B = 22;
  const hist = s.history.filter((p, i) => i === s.history.length - 1 || s.history[i + 1][0] >= s.now - CHART_SECONDS);
  const t0 = hist.length ? Math.max(hist[0][0], s.now - CHART_SECONDS) : s.now - 60;
  const span = Math.max(s.now - t0, 1);
  const n = Math.max(s.devices.length, 1);
  const qmax = Math.max(1, ...hist.map((p) => p[2]));
  const x = (t) => (L + (W - L - R) * (t - t0) / span).toFixed(1);
  const yu = (v) => (T + (H - T - B) * (1 - v / n)).toFixed(1);
  const yq = (v) => (T + (H - T - B) * (1 - v / qmax)).toFixed(1);
  chart.appendChild(svg('line', {class: 'axis', x1: L, y1: H - B, x2: W - R, y2: H - B}));
  chart.appendChild(svg('line', {class: 'axis', x1: L, y1: T, x2: L, y2: H - B}));
  chart.appendChild(svg('line', {class: 'axis', x1: W - R, y1: T, x2: W - R, y2: H - B}));
  const label = (tx, ty, text, anchor) => {
    const e = svg('text', {x: tx, y: ty, 'text-anchor': anchor});
    e.textContent = text;
    chart.appendChild(e);
  };
  label(L - 4, T + 8, '100%', 'end');
  label(L - 4, H - B, '0%', 'end');
  label(W - R + 4, T + 8, String(qmax), 'start');
  label(W - R + 4, H - B, '0', 'start');
  label(L, H - 6, clock(t0), 'start');
  label(W - R, H - 6, clock(s.now), 'end');
  const util = stepPoints(hist, s.now, t0, x, yu, (p) => p[1]);
  const queue = stepPoints(hist, s.now, t0, x, yq, (p) => p[2]);
  chart.appendChild(svg('polyline', {id: 'util-line', class: 'util', points: util.join(' ')}));
  chart.appendChild(svg('polyline', {id: 'queue-line', class: 'queue', points: queue.join(' ')}));
  chart.dataset.samples = String(hist.length);
}

function renderTeams(s) {
  const section = document.getElementById('teams-section');
  section.hidden = s.teams.length === 0;
  const box = document.getElementById('teams');
  box.replaceChildren();
  const most = Math.max(1, ...s.teams.map((t) => Math.max(t.share, t.held)));
  for (const t of s.teams) {
    const row = el('div', {class: 'team', 'data-team': t.name});
    const name = el('span', {}, t.name);
    name.prepend(el('span', {class: 'swatch'}));
    name.firstChild.style.background = colour(t.name);
    row.appendChild(name);
    const bar = el('div', {class: 'bar'});
    const used = el('div', {class: 'used'});
    used.style.width = (100 * t.held / most) + '%';
    used.style.background = colour(t.name);
    const quota = el('div', {class: 'quota'});
    quota.style.left = (100 * t.share / most) + '%';
    bar.append(used, quota);
    row.appendChild(bar);
    row.appendChild(el('span', {class: 'usage'}, t.held + ' of ' + t.share + ' devices · ' + t.queued + ' queued'));
    box.appendChild(row);
  }
}

function cells(tr, values) {
  for (const [v, cls] of values) tr.appendChild(el('td', cls ? {class: cls} : {}, v));
}

function renderQueue(s) {
  const body = document.querySelector('#queue tbody');
  body.replaceChildren();
  for (const j of s.jobs.filter((j) => j.state === 'queued')) {
    const tr = el('tr', {id: 'queued-' + j.id, 'data-state': j.state});
    const est = j.estimated_start === null ? '—' : j.estimated_start <= s.now ? 'now' : clock(j.estimated_start) +
        ' (in ' + duration(j.estimated_start - s.now) + ')';
    cells(tr, [[j.id, 'num'], [j.name], [j.team], [j.owner], [j.devices, 'num'], [duration(j.wait_s), 'num'], [est]]);
    body.appendChild(tr);
  }
}

function renderJobs(s) {
  const body = document.querySelector('#jobs tbody');
  body.replaceChildren();
  for (const j of s.jobs) {
    const tr = el('tr', {id: 'job-' + j.id, 'data-state': j.state});
    const p = j.progress;
    const epoch = p ? (p.epochs ? p.epoch + '/' + p.epochs : String(p.epoch)) : '';
    cells(tr, [[j.id, 'num'], [j.name, 'name'], [j.team], [j.owner], [j.state, 'state'],
               [j.device_names.length ? j.device_names.join(',') : j.devices], [duration(j.run_s), 'num'],
               [epoch, 'num'], [p ? p.step : '', 'num'], [p ? fixed(p.loss, 4) : '', 'num'],
               [p ? fixed(p.samples_per_s, 1) : '', 'num']]);
    tr.title = j.reason;
    body.appendChild(tr);
  }
}

function render(s) {
  const jobs = new Map(s.jobs.map((j) => [j.id, j]));
  renderSummary(s);
  renderDevices(s, jobs);
  renderChart(s);
  renderTeams(s);
  renderQueue(s);
  renderJobs(s);
  document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
}

async function poll() {
  try {
    const r = await fetch('/api/state', {cache: 'no-store'});
    if (!r.ok) throw new Error('HTTP ' + r.status);
    render(await r.json());
  } catch (e) {
    const u = document.getElementById('updated');
    u.textContent = 'daemon unreachable: ' + e.message;
    u.dataset.ok = 'false';
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

poll();
)JS";
  return js;
}

}  // namespace ember::sched
