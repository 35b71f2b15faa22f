'use strict';
// The loadring dashboard. Polls /status once a second (?refresh=0: once,
// then frozen) and draws it. The DOM is built with textContent only:
// endpoint names, tags and zones are data, never markup.
(function () {
  const WINDOW_S = 300;
  // The most endpoints of a cluster the page asks /status for
  // (/status?endpoints=SHOWN, docs/proxy.md): its busiest, in membership
  // order. More rows and lines than this tell a person nothing, and the
  // proxy builds the JSON of the endpoints listed only.
  const SHOWN = 200;
  const params = new URLSearchParams(window.location.search);
  const frozen = params.get('refresh') === '0';
  // Colour is never alone: each line also has its own dash pattern, shown
  // in the legend next to the endpoint's name.
  const PALETTE = ['#2f6fdf', '#d1495b', '#1a936f', '#c98a00', '#7b2cbf', '#00798c', '#8a5a44', '#5c677d'];
  const DASHES = [[], [7, 3], [2, 3], [9, 3, 2, 3], [1, 3], [12, 4], [5, 2, 1, 2], [14, 2]];

  const root = document.getElementById('clusters');
  const state = document.getElementById('state');
  // Per cluster name: the samples of the last WINDOW_S seconds, from
  // /history when the page opens, then from each poll (see record()).
  const history = new Map();

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function endpointKey(e) {
    return e.tag === null || e.tag === undefined ? e.addr : e.addr + ' #' + e.tag;
  }

  function percent(x, digits) {
    return (x * 100).toFixed(digits === undefined ? 1 : digits) + '%';
  }

  function perSecond(x) {
    return x >= 100 ? x.toFixed(0) : x.toFixed(1);
  }

  function seconds(ms) {
    const s = Math.ceil(ms / 1000);
    return s >= 120 ? Math.floor(s / 60) + ' min ' + (s % 60) + ' s' : s + ' s';
  }

  // 10000 as "10,000".
  function grouped(n) {
    return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  }

  function counters(x) {
    return { requests: x.requests, errors: x.errors, spills: x.spills };
  }

  // One cluster's samples. `times` (seconds of uptime, oldest first),
  // `totals` (its counters, null where it was not configured) and `spills`
  // (spills per second) are aligned; `first` counts the samples dropped
  // from their front, so sample j of `times` is number first + j.
  // `endpoints`: per endpoint, what was read of it as runs of consecutive
  // samples, oldest first, each `{from, inFlight, requests, errors,
  // spills}` (`from` its first sample's number). /history lists every
  // member; a poll lists only the busiest (SHOWN), so an endpoint that
  // leaves them ends its run (its line stops) and one that joins them
  // starts one. Only what was read is kept: however often the busiest
  // change, the runs hold at most SHOWN values a poll.
  function emptyHistory() {
    return { times: [], first: 0, totals: [], spills: [], last: null, endpoints: new Map() };
  }

  // The cluster's counters to take rates from at `time` (with their time):
  // the latest sample at least a second before it, else the oldest before.
  function clusterBaseline(h, time) {
    if (!h) return null;
    let found = null;
    for (let j = h.times.length - 1; j >= 0; j--) {
      if (h.times[j] >= time || h.totals[j] === null) continue;
      found = Object.assign({ time: h.times[j] }, h.totals[j]);
      if (h.times[j] <= time - 1) break;
    }
    return found;
  }

  // An endpoint's counters to take rates from at `time`, as
  // clusterBaseline() picks them among the samples that hold it: one that
  // just joined the busiest gets its rate from /history or from when it
  // was last listed.
  function endpointBaseline(h, key, time) {
    const runs = h ? h.endpoints.get(key) : undefined;
    if (!runs) return null;
    let found = null;
    for (let r = runs.length - 1; r >= 0; r--) {
      const run = runs[r];
      for (let k = run.requests.length - 1; k >= 0; k--) {
        const j = run.from + k - h.first;
        if (j < 0) break;
        if (h.times[j] >= time || run.requests[k] === null) continue;
        found = { time: h.times[j], requests: run.requests[k], errors: run.errors[k], spills: run.spills[k] };
        if (h.times[j] <= time - 1) return found;
      }
    }
    return found;
  }

  // Rates between a reading at `time` and an earlier one (with its time);
  // null on the first one or after a restart.
  function rates(now, then, time) {
    const dt = then ? time - then.time : 0;
    if (!then || dt <= 0 || now.requests < then.requests) return null;
    const requests = now.requests - then.requests;
    const errors = now.errors - then.errors;
    const spills = now.spills - then.spills;
    return {
      requests: requests / dt,
      spills: spills / dt,
      errorShare: requests > 0 ? errors / requests : 0,
      spillShare: requests > 0 ? spills / requests : 0,
      requestsInWindow: requests,
    };
  }

  function health(e) {
    if (e.ejected_ms !== null && e.ejected_ms !== undefined) {
      return ['ejected', '\u2715 ejected, back in ' + seconds(e.ejected_ms)];
    }
    if (!e.checked_up) return ['down', '\u2715 down (health checks fail)'];
    if (!e.healthy) return ['down', '\u2715 down'];
    if (e.slow_start !== null && e.slow_start !== undefined) {
      return ['warming', '\u25B2 slow start, ' + percent(e.slow_start, 0) + ' of its share'];
    }
    return ['up', '\u2713 up'];
  }

  function cell(row, label, className, text) {
    const td = el('td', className, text);
    td.dataset.label = label;
    row.appendChild(td);
    return td;
  }

  // `reports`: the cluster reads backends' load reports; their fleet-wide
  // load is shown beside this proxy's own count.
  function inFlightCell(row, e, scale, reports) {
    const td = cell(row, 'In flight / cap', 'in-flight');
    td.dataset.inFlight = String(e.in_flight);
    const reported = e.reported_load === null || e.reported_load === undefined ? null : e.reported_load;
    td.dataset.reported = reported === null ? '' : String(reported);
    td.dataset.cap = e.cap === null ? '' : String(e.cap);
    const bar = el('div', 'bar');
    bar.setAttribute('role', 'img');
    const atCap = e.cap !== null && e.in_flight >= e.cap;
    const fill = el('div', atCap ? 'fill at-cap' : 'fill');
    fill.style.width = Math.min(100, (e.in_flight / scale) * 100).toFixed(2) + '%';
    bar.appendChild(fill);
    let text = e.in_flight + ' in flight';
    if (e.cap !== null) {
      const line = el('div', 'cap-line');
      line.dataset.cap = String(e.cap);
      line.style.left = Math.min(100, (e.cap / scale) * 100).toFixed(2) + '%';
      line.title = 'cap ' + e.cap;
      bar.appendChild(line);
      text += ' / cap ' + e.cap;
    } else {
      text += ' \u00B7 no cap';
    }
    if (reports) {
      text += reported === null ? ' \u00B7 no fresh report' : ' \u00B7 reported ' + reported;
    }
    bar.setAttribute('aria-label', text);
    td.appendChild(bar);
    const label = el('div', 'bar-label');
    label.appendChild(el('span', 'num', text));
    if (atCap) label.appendChild(el('span', 'at-cap-mark', ' \u25A0 at cap'));
    td.appendChild(label);
  }

  function endpointRow(e, i, h, time, scale, reports) {
    const row = el('tr', 'endpoint');
    row.dataset.row = String(i);
    cell(row, 'Endpoint', 'addr', e.addr);
    cell(row, 'Tag', 'tag', e.tag === null ? '\u2014' : e.tag);
    cell(row, 'Zone', 'zone', e.zone === null ? '\u2014' : e.zone);
    cell(row, 'Weight', 'weight num', e.weight);
    const [kind, text] = health(e);
    const status = cell(row, 'Health', 'health', text);
    status.dataset.health = kind;
    inFlightCell(row, e, scale, reports);
    const r = rates(e, endpointBaseline(h, endpointKey(e), time), time);
    cell(row, 'Req/s', 'rate num', r ? perSecond(r.requests) : '\u2026');
    cell(row, 'Errors', 'errors num', r && r.requestsInWindow > 0 ? percent(r.errorShare) : '\u2014');
    cell(row, 'Arrived as spills', 'spilled num', r && r.requestsInWindow > 0 ? percent(r.spillShare) : '\u2014');
    let share = '\u2014';
    if (e.share !== null && e.share !== undefined) {
      share = percent(e.share, 2);
      if (e.fair_share > 0) share += ' (\u00D7' + (e.share / e.fair_share).toFixed(3) + ' of fair ' + percent(e.fair_share, 2) + ')';
    }
    cell(row, 'Hash share', 'share num', share);
    return row;
  }

  function stat(list, name, value, className) {
    const div = el('div');
    div.appendChild(el('dt', null, name));
    div.appendChild(el('dd', className || 'num', value));
    list.appendChild(div);
  }

  // Spills per second between two readings of the spill counter.
  function spillRate(spills, t, last) {
    if (!last || t <= last.time || spills < last.spills) return null;
    return (spills - last.spills) / (t - last.time);
  }

  // Drops the samples older than WINDOW_S before `t`, the runs with no
  // sample left and the endpoints with no run left.
  function trim(h, t) {
    let drop = 0;
    while (drop < h.times.length && h.times[drop] < t - WINDOW_S) drop++;
    if (drop === 0) return;
    h.times.splice(0, drop);
    h.totals.splice(0, drop);
    h.spills.splice(0, drop);
    h.first += drop;
    for (const [key, runs] of h.endpoints) {
      while (runs.length > 0 && runs[0].from + runs[0].inFlight.length <= h.first) runs.shift();
      if (runs.length === 0) h.endpoints.delete(key);
    }
  }

  const FIELDS = ['inFlight', 'requests', 'errors', 'spills'];

  // The minutes before the page opened, from /history (every member: the
  // page draws only the endpoints /status lists, and finds the past of
  // the others here when they join them).
  function seed(doc) {
    const times = doc.uptime_ms.map((ms) => ms / 1000);
    for (const c of doc.clusters) {
      const h = emptyHistory();
      h.times = times.slice();
      c.spills.forEach((spills, j) => {
        h.spills.push(spills === null ? null : spillRate(spills, times[j], h.last));
        if (spills !== null) h.last = { spills: spills, time: times[j] };
        h.totals.push(c.requests[j] === null ? null : { requests: c.requests[j], errors: c.errors[j], spills: spills });
      });
      for (const e of c.endpoints) {
        h.endpoints.set(endpointKey(e), [
          { from: 0, inFlight: e.in_flight, requests: e.requests, errors: e.errors, spills: e.spills },
        ]);
      }
      history.set(c.name, h);
    }
  }

  // Records one reading of /status at `t` (seconds of uptime); a reading
  // no newer than the last is not recorded again.
  function record(cluster, t) {
    let h = history.get(cluster.name);
    if (!h) {
      h = emptyHistory();
      history.set(cluster.name, h);
    }
    if (h.times.length > 0 && t <= h.times[h.times.length - 1]) return h;
    h.times.push(t);
    h.totals.push(counters(cluster));
    h.spills.push(spillRate(cluster.spills, t, h.last));
    h.last = { spills: cluster.spills, time: t };
    const n = h.first + h.times.length - 1;
    for (const e of cluster.endpoints) {
      const key = endpointKey(e);
      let runs = h.endpoints.get(key);
      if (!runs) {
        runs = [];
        h.endpoints.set(key, runs);
      }
      let run = runs[runs.length - 1];
      const end = run ? run.from + run.inFlight.length : -1;
      if (end > n) continue;
      if (end < n) {
        run = { from: n, inFlight: [], requests: [], errors: [], spills: [] };
        runs.push(run);
      }
      run.inFlight.push(e.in_flight);
      run.requests.push(e.requests);
      run.errors.push(e.errors);
      run.spills.push(e.spills);
      // A long run's samples before the window go, a few dozen at a time.
      const stale = h.first - run.from;
      if (stale >= 64) {
        for (const f of FIELDS) run[f].splice(0, stale);
        run.from = h.first;
      }
    }
    trim(h, t);
    return h;
  }

  function prepare(canvas) {
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth || 600;
    const height = canvas.clientHeight || 140;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    const ctx = canvas.getContext('2d');
    ctx.scale(ratio, ratio);
    return { ctx: ctx, width: width, height: height };
  }

  function axes(ctx, width, height, top, now, left) {
    const styles = getComputedStyle(document.documentElement);
    const muted = styles.getPropertyValue('--muted').trim() || '#666';
    const line = styles.getPropertyValue('--line').trim() || '#ccc';
    ctx.font = '10px system-ui, sans-serif';
    ctx.fillStyle = muted;
    ctx.strokeStyle = line;
    ctx.lineWidth = 1;
    ctx.setLineDash([]);
    const bottom = height - 14;
    for (const [value, y] of [[top, 6], [top / 2, (6 + bottom) / 2], [0, bottom]]) {
      ctx.beginPath();
      ctx.moveTo(left, y);
      ctx.lineTo(width - 4, y);
      ctx.stroke();
      ctx.fillText(Number.isInteger(value) ? String(value) : value.toFixed(1), 2, y + 3);
    }
    ctx.fillText('\u22125 min', left, height - 2);
    ctx.fillText('now', width - 24, height - 2);
    return {
      x: (t) => left + ((t - (now - WINDOW_S)) / WINDOW_S) * (width - 4 - left),
      y: (v) => bottom - (v / top) * (bottom - 6),
      bottom: bottom,
    };
  }

  // The lines of the endpoints `keys` (those /status listed last), over
  // the samples of the window: a gap where an endpoint was not listed.
  function drawInFlight(canvas, h, keys) {
    const { ctx, width, height } = prepare(canvas);
    const now = h.times[h.times.length - 1] || 0;
    const series = keys.map((key) => h.endpoints.get(key) || []);
    let top = 1;
    for (const runs of series) {
      for (const run of runs) {
        for (let k = Math.max(0, h.first - run.from); k < run.inFlight.length; k++) {
          const v = run.inFlight[k];
          if (v !== null && v > top) top = v;
        }
      }
    }
    const a = axes(ctx, width, height, top, now, 30);
    ctx.lineWidth = 2;
    series.forEach((runs, i) => {
      ctx.strokeStyle = PALETTE[i % PALETTE.length];
      ctx.setLineDash(DASHES[i % DASHES.length]);
      ctx.beginPath();
      for (const run of runs) {
        let drawing = false;
        for (let k = Math.max(0, h.first - run.from); k < run.inFlight.length; k++) {
          const v = run.inFlight[k];
          if (v === null) {
            drawing = false;
            continue;
          }
          const x = a.x(h.times[run.from + k - h.first]);
          const y = a.y(v);
          if (drawing) ctx.lineTo(x, y);
          else ctx.moveTo(x, y);
          drawing = true;
        }
      }
      ctx.stroke();
    });
  }

  function drawSpills(canvas, h) {
    const { ctx, width, height } = prepare(canvas);
    const now = h.times[h.times.length - 1] || 0;
    let top = 1;
    for (const v of h.spills) if (v !== null && v > top) top = v;
    const a = axes(ctx, width, height, top, now, 30);
    const styles = getComputedStyle(document.documentElement);
    ctx.fillStyle = styles.getPropertyValue('--full').trim() || '#b42318';
    const barWidth = Math.max(1, (width - 34) / WINDOW_S);
    h.spills.forEach((v, j) => {
      if (v === null || v <= 0) return;
      const y = a.y(v);
      ctx.fillRect(a.x(h.times[j]) - barWidth, y, barWidth, a.bottom - y);
    });
  }

  function legend(keys) {
    const list = el('ul', 'legend');
    keys.forEach((key, i) => {
      const item = el('li');
      const swatch = el('canvas');
      swatch.setAttribute('aria-hidden', 'true');
      item.appendChild(swatch);
      item.appendChild(el('span', null, key));
      list.appendChild(item);
    });
    return list;
  }

  function drawSwatches(list) {
    list.querySelectorAll('canvas').forEach((canvas, i) => {
      const { ctx, width, height } = prepare(canvas);
      ctx.strokeStyle = PALETTE[i % PALETTE.length];
      ctx.setLineDash(DASHES[i % DASHES.length]);
      ctx.lineWidth = 2;
      ctx.beginPath();
      ctx.moveTo(0, height / 2);
      ctx.lineTo(width, height / 2);
      ctx.stroke();
    });
  }

  function clusterSection(cluster, doc) {
    const time = doc.uptime_ms / 1000;
    // Rates against the samples before this reading (recorded below).
    const before = history.get(cluster.name);
    const section = el('section', 'cluster');
    section.dataset.cluster = cluster.name;
    section.appendChild(el('h2', null, 'Cluster ' + cluster.name));
    const policy = el('p', 'policy');
    const spec = el('span', null, 'policy ');
    spec.appendChild(el('code', 'spec', cluster.policy));
    policy.appendChild(spec);
    const key = el('span', null, 'key ');
    key.appendChild(el('code', 'key', cluster.key.length ? cluster.key.join(' + ') : '(none)'));
    policy.appendChild(key);
    section.appendChild(policy);

    const shown = cluster.endpoints.length;
    const count = typeof cluster.endpoint_count === 'number' ? cluster.endpoint_count : shown;
    const r = rates(cluster, clusterBaseline(before, time), time);
    const summary = el('dl', 'summary');
    stat(summary, 'In flight', String(cluster.in_flight));
    stat(summary, 'Mean per endpoint', cluster.in_flight_mean.toFixed(2));
    stat(summary, 'Requests/s', r ? perSecond(r.requests) : '\u2026');
    stat(summary, 'Spills/s', r ? perSecond(r.spills) : '\u2026');
    stat(summary, 'Errors', r && r.requestsInWindow > 0 ? percent(r.errorShare) : '\u2014');
    if (cluster.layout) {
      const dev = cluster.layout.deviation;
      stat(summary, 'Hash-space deviation', percent(dev, 2) + (dev > 0.1 ? ' \u26A0' : ''), dev > 0.1 ? 'num dev-high' : 'num');
      stat(summary, 'Ring', cluster.layout.entries + ' ' + cluster.layout.entry_label + ', max/mean ' + cluster.layout.max_over_mean.toFixed(3));
    }
    stat(summary, 'Endpoints', grouped(count));
    section.appendChild(summary);

    if (count > shown) {
      const note = el('p', 'shown', 'The ' + grouped(shown) + ' busiest of ' + grouped(count) +
        ' endpoints (most in flight, then most requests), in membership order');
      note.dataset.shown = String(shown);
      note.dataset.count = String(count);
      section.appendChild(note);
    }

    const table = el('table', 'endpoints');
    const head = el('thead');
    const headRow = el('tr');
    for (const name of ['Endpoint', 'Tag', 'Zone', 'Weight', 'Health', 'In flight / cap', 'Req/s', 'Errors', 'Arrived as spills', 'Hash share']) {
      const th = el('th', null, name);
      th.scope = 'col';
      headRow.appendChild(th);
    }
    head.appendChild(headRow);
    table.appendChild(head);
    const body = el('tbody');
    // One scale for the cluster's bars, with room past the highest cap so
    // that its line never sits on the edge.
    let scale = 1;
    for (const e of cluster.endpoints) scale = Math.max(scale, e.in_flight, e.cap === null ? 0 : e.cap);
    scale *= 1.25;
    cluster.endpoints.forEach((e, i) => body.appendChild(endpointRow(e, i, before, time, scale, !!cluster.load_report)));
    table.appendChild(body);
    section.appendChild(table);

    const h = record(cluster, time);
    // Lines for the endpoints listed, in the table's order; when every
    // member is listed, also for those that left it while their samples
    // are in the window (at most SHOWN lines in all).
    const keys = cluster.endpoints.map(endpointKey);
    if (count <= shown) {
      const listed = new Set(keys);
      for (const key of h.endpoints.keys()) {
        if (keys.length >= SHOWN) break;
        if (!listed.has(key)) keys.push(key);
      }
    }
    const timeline = el('div', 'timeline');
    const f1 = el('figure');
    f1.appendChild(el('figcaption', null, 'In flight per endpoint' + (count > shown ? ' listed' : '') +
      ', last 5 minutes (each line its own dash pattern)'));
    const inFlightCanvas = el('canvas', 'in-flight-chart');
    inFlightCanvas.setAttribute('role', 'img');
    inFlightCanvas.setAttribute('aria-label', 'in flight per endpoint over the last 5 minutes');
    f1.appendChild(inFlightCanvas);
    const keyList = legend(keys);
    f1.appendChild(keyList);
    timeline.appendChild(f1);
    const f2 = el('figure');
    f2.appendChild(el('figcaption', null, 'Spills per second (bounded picks that left the key\u2019s owner)'));
    const spillCanvas = el('canvas', 'spills');
    spillCanvas.setAttribute('role', 'img');
    spillCanvas.setAttribute('aria-label', 'spills per second over the last 5 minutes');
    f2.appendChild(spillCanvas);
    timeline.appendChild(f2);
    section.appendChild(timeline);
    const draw = () => {
      drawInFlight(inFlightCanvas, h, keys);
      drawSpills(spillCanvas, h);
      drawSwatches(keyList);
    };
    return { section: section, draw: draw };
  }

  let lastUptime = 0;
  let polls = 0;

  function show(doc) {
    // Sections are built against the readings before this one, then
    // record it (record() in clusterSection).
    const built = doc.clusters.map((c) => clusterSection(c, doc));
    root.replaceChildren(...built.map((b) => b.section));
    // Canvases are drawn once they are in the page and have a size.
    for (const b of built) b.draw();
    lastUptime = doc.uptime_ms;
  }

  async function poll() {
    try {
      const response = await fetch('/status?endpoints=' + SHOWN, { cache: 'no-store', headers: { Accept: 'application/json' } });
      if (!response.ok) throw new Error('HTTP ' + response.status);
      show(await response.json());
      polls += 1;
      // How many readings the page made (a frozen page makes one).
      state.dataset.polls = String(polls);
      state.dataset.state = frozen ? 'frozen' : 'live';
      state.textContent = (frozen ? 'frozen (refresh=0): reload to update' : 'live, every second') +
        ' \u00B7 up ' + seconds(lastUptime);
    } catch (err) {
      state.dataset.state = 'error';
      state.textContent = 'no answer from /status: ' + err.message;
    }
    if (!frozen) window.setTimeout(poll, 1000);
  }

  async function start() {
    try {
      const response = await fetch('/history', { cache: 'no-store', headers: { Accept: 'application/json' } });
      if (response.ok) seed(await response.json());
    } catch (err) {
      // No history: the timeline starts now.
    }
    poll();
  }

  start();
})();
