'use strict';
// Polls /api/state and redraws. Everything from the daemon goes into the page as text (createElement and
// textContent, never HTML): job names, teams and owners come from users.
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
