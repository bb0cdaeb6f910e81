/**
 * The account page's script (served as /account/app.js; the CSP forbids inline script). Plain
 * browser JavaScript kept as a string so tsc ships it in dist with no bundler. It reads only the
 * public v1 API with the key entered, by relative URLs: GET api/v1/account (the balance),
 * GET api/v1/usage (30 days, drawn here as an inline SVG bar chart) and GET api/v1/removals (the
 * recent removals and their confidence). Written without backticks or dollar-brace so it can
 * live in this template literal.
 */
export const ACCOUNT_JS = String.raw`(function () {
  'use strict';

  // The playground's name: a key entered in either page serves both.
  var KEY_STORAGE = 'cutout.playground.apiKey';
  var SVG = 'http://www.w3.org/2000/svg';
  // The chart is drawn in its own pixels (its width when drawn), so that its text keeps its size on a phone.
  var MARGIN = { left: 34, right: 8, top: 10, bottom: 24 };

  function $(id) { return document.getElementById(id); }
  var els = {
    form: $('key-form'), key: $('key'), show: $('show'), error: $('error'),
    balance: $('balance'), plan: $('plan'), monthCredits: $('month-credits'), removals30: $('removals-30'),
    chart: $('chart'), chartEmpty: $('chart-empty'), legend: $('legend'),
    table: $('removals'), body: $('removals-body'), removalsEmpty: $('removals-empty')
  };

  function loadKey() {
    try { return window.localStorage.getItem(KEY_STORAGE) || ''; } catch (e) { return ''; }
  }
  function saveKey(value) {
    try {
      if (value) window.localStorage.setItem(KEY_STORAGE, value);
      else window.localStorage.removeItem(KEY_STORAGE);
    } catch (e) { /* private mode: the key lives in the field only */ }
  }

  function showError(text) { els.error.textContent = text; els.error.hidden = false; }
  function clearError() { els.error.textContent = ''; els.error.hidden = true; }

  async function getJson(path, key) {
    var res;
    try {
      res = await fetch(path, { headers: { Authorization: 'Bearer ' + key } });
    } catch (e) {
      throw new Error('The server could not be reached.');
    }
    var body = null;
    try { body = await res.json(); } catch (e) { body = null; }
    if (!res.ok) {
      var msg = body && body.error && body.error.message ? body.error.message : 'The server answered ' + res.status + '.';
      if (res.status === 401) msg = 'This key was not accepted: ' + msg;
      throw new Error(msg);
    }
    return body;
  }

  function showAccount(a) {
    els.balance.textContent = String(a.balance);
    els.plan.textContent = a.plan + (a.test ? ' (test key)' : '');
    els.monthCredits.textContent = String(a.credits_used_this_month);
  }

  function svg(name, attrs, parent) {
    var el = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (k) { el.setAttribute(k, String(attrs[k])); });
    if (parent) parent.appendChild(el);
    return el;
  }

  /** Bars of removals per day, the credits they cost drawn inside them; oldest day on the left. */
  function drawUsage(days) {
    var list = days.slice().reverse();
    var width = Math.max(280, Math.round(els.chart.clientWidth || 600));
    var c = { width: width, height: Math.round(Math.min(220, Math.max(150, width * 0.33))), left: MARGIN.left, right: MARGIN.right, top: MARGIN.top, bottom: MARGIN.bottom };
    var max = 1;
    list.forEach(function (d) { max = Math.max(max, d.requests, d.credits); });
    var plotW = c.width - c.left - c.right;
    var plotH = c.height - c.top - c.bottom;
    var step = plotW / list.length;
    var barW = Math.max(2, step * 0.7);
    var root = svg('svg', { viewBox: '0 0 ' + c.width + ' ' + c.height, role: 'img', 'aria-labelledby': 'chart-title', id: 'usage-chart' });
    svg('title', { id: 'chart-title' }, root).textContent = 'Removals and credits per day, last ' + list.length + ' days';
    var baseY = c.top + plotH;
    svg('line', { class: 'axis', x1: c.left, y1: baseY, x2: c.width - c.right, y2: baseY }, root);
    svg('line', { class: 'axis', x1: c.left, y1: c.top, x2: c.left, y2: baseY }, root);
    svg('text', { x: c.left - 4, y: c.top + 8, 'text-anchor': 'end' }, root).textContent = String(max);
    svg('text', { x: c.left - 4, y: baseY, 'text-anchor': 'end' }, root).textContent = '0';
    list.forEach(function (d, i) {
      var x = c.left + i * step + (step - barW) / 2;
      var group = svg('g', { class: 'day' }, root);
      svg('title', {}, group).textContent = d.date + ': ' + d.requests + ' removals, ' + d.credits + ' credits';
      var hr = (d.requests / max) * plotH;
      var hc = (d.credits / max) * plotH;
      svg('rect', { class: 'bar-requests', x: x.toFixed(1), y: (baseY - hr).toFixed(1), width: barW.toFixed(1), height: hr.toFixed(1) }, group);
      svg('rect', { class: 'bar-credits', x: (x + barW * 0.2).toFixed(1), y: (baseY - hc).toFixed(1), width: (barW * 0.6).toFixed(1), height: hc.toFixed(1) }, group);
    });
    [0, list.length - 1].forEach(function (i) {
      var x = c.left + i * step + step / 2;
      svg('text', { x: x.toFixed(1), y: c.height - 6, 'text-anchor': i === 0 ? 'start' : 'end' }, root).textContent = list[i].date.slice(5);
    });
    els.chart.replaceChildren(root);
    els.legend.hidden = false;
  }

  function cell(row, text, className) {
    var td = document.createElement('td');
    td.textContent = text;
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }

  function when(iso) {
    var d = new Date(iso);
    return d.toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', hour12: false });
  }

  function showRemovals(list) {
    els.body.replaceChildren();
    list.forEach(function (r) {
      var row = document.createElement('tr');
      cell(row, when(r.created_at));
      cell(row, r.input || (r.channel === 'job' ? 'job' : 'upload'), 'col-input').title = r.input || '';
      cell(row, r.size);
      cell(row, String(r.credits), 'num');
      var c = r.confidence;
      cell(row, c === null || c === undefined ? '–' : Math.round(c * 100) + ' %', 'num' + (c !== null && c < 0.5 ? ' confidence-low' : ''));
      els.body.appendChild(row);
    });
    els.table.hidden = list.length === 0;
    els.removalsEmpty.hidden = list.length !== 0;
  }

  async function refresh() {
    var key = els.key.value.trim();
    if (!key) { showError('Enter your API key.'); return; }
    clearError();
    els.show.disabled = true;
    try {
      var got = await Promise.all([getJson('api/v1/account', key), getJson('api/v1/usage', key), getJson('api/v1/removals?limit=20', key)]);
      saveKey(key);
      showAccount(got[0]);
      drawUsage(got[1].days);
      els.removals30.textContent = String(got[1].days.reduce(function (n, d) { return n + d.requests; }, 0));
      showRemovals(got[2].removals);
      document.body.setAttribute('data-loaded', 'true');
    } catch (e) {
      showError(e.message);
    } finally {
      els.show.disabled = false;
    }
  }

  els.form.addEventListener('submit', function (e) { e.preventDefault(); refresh(); });
  els.key.value = loadKey();
  if (els.key.value) refresh();
})();
`;
