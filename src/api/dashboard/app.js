// rankstream operator dashboard: plain ES2020, no dependencies.
// Every string from the API reaches the DOM through textContent / createElement.
'use strict';

const KEY_STORAGE = 'rankstream.adminKey';
const POLL_MS = 2000;
const CHART_POINTS = 60;
const DEFAULT_PAGE = 'live';
const SCOPES = [
  'recommend', 'search', 'chat', 'embed', 'catalog:read',
  'catalog:write', 'users:write', 'events:write', 'metrics', 'admin',
];
const TRY_INPUT_LABELS = {
  recommend: 'Candidate item ids',
  search: 'Query',
  chat: 'Message',
};

const state = {
  key: null,            // the admin key, mirrored in sessionStorage
  page: null,           // the page shown now ('keys', 'catalog', 'live', 'experiments', 'try')
  experimentTimer: null, // the next refresh of the Experiments page
  experimentToken: 0,   // bumped when that page is left, so that late answers are dropped
  tables: [],           // the last catalog tables read
  pollTimer: null,      // the next poll of the Live page
  pollToken: 0,         // bumped when polling stops, so that late answers are dropped
  lastSample: null,     // {time, events, requests} of the previous poll
  eventRates: [],
  requestRates: [],
  conversationId: null, // the chat conversation of the Try it page
};

// ---------------------------------------------------------------- DOM helpers

const $ = (id) => document.getElementById(id);

/** Creates an element; `text` (if given) becomes its textContent. */
function el(tag, { className, text, attrs } = {}, children = []) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  for (const child of children) node.append(child);
  return node;
}

/** A table row of plain-text cells; cells given as nodes are appended as they are. */
function row(cells, attrs) {
  const tr = el('tr', { attrs });
  for (const cell of cells) {
    const td = el('td');
    if (cell instanceof Node) td.append(cell);
    else td.textContent = cell === undefined || cell === null ? '' : String(cell);
    tr.append(td);
  }
  return tr;
}

function fillTableBody(table, rows, emptyText) {
  const tbody = table.tBodies[0];
  tbody.replaceChildren(...rows);
  if (rows.length === 0 && emptyText) {
    const td = el('td', { className: 'empty', text: emptyText });
    td.colSpan = table.tHead.rows[0].cells.length;
    tbody.append(el('tr', {}, [td]));
  }
}

/** Replaces a select's options, keeping the selected value when it still exists. */
function fillSelect(select, values) {
  const previous = select.value;
  select.replaceChildren(...values.map((value) => el('option', { text: value, attrs: { value } })));
  if (values.includes(previous)) select.value = previous;
}

function formatNumber(value, decimals = 0) {
  if (typeof value !== 'number' || !Number.isFinite(value)) return '—';
  return value.toLocaleString('en-US', { maximumFractionDigits: decimals });
}

function formatTime(rfc3339) {
  if (!rfc3339) return 'never';
  const date = new Date(rfc3339);
  return Number.isNaN(date.getTime()) ? String(rfc3339) : date.toLocaleString();
}

// ---------------------------------------------------------------- errors and API calls

class ApiError extends Error {
  constructor(code, message, details, status) {
    super(message);
    this.code = code;
    this.details = details;
    this.status = status;
  }
}

function showError(error) {
  const area = $('error');
  const code = error instanceof ApiError ? error.code : 'error';
  const children = [el('div', { className: 'error-text', text: `${code}: ${error.message}` })];
  if (error instanceof ApiError && error.details !== undefined && error.details !== null) {
    children.push(el('pre', { className: 'error-details', text: JSON.stringify(error.details, null, 2) }));
  }
  area.replaceChildren(...children);
  area.hidden = false;
}

function clearError() {
  const area = $('error');
  area.replaceChildren();
  area.hidden = true;
}

/** The error of a non-2xx response, worded as the API words it. */
async function responseError(response) {
  const text = await response.text().catch(() => '');
  try {
    const body = JSON.parse(text);
    if (body && typeof body.code === 'string') {
      return new ApiError(body.code, body.message ?? '', body.details, response.status);
    }
  } catch (_) {
    // not JSON: fall through
  }
  const message = text.trim() || response.statusText || 'request failed';
  return new ApiError(`http_${response.status}`, message, undefined, response.status);
}

/**
 * The one helper every API call goes through.
 * Options: method, body (sent as JSON), text (read the answer as text), key (override).
 */
async function api(path, { method = 'GET', body, text = false, key = state.key } = {}) {
  const headers = { Authorization: `Bearer ${key}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
      credentials: 'omit',
    });
  } catch (error) {
    throw new ApiError('network', error.message || String(error));
  }
  if (!response.ok) throw await responseError(response);
  if (text) return response.text();
  const raw = await response.text();
  return raw ? JSON.parse(raw) : null;
}

/**
 * Runs a user action: shows its error, or clears the error area when it succeeds.
 * `button` (optional) is disabled while the action runs.
 */
async function run(action, button) {
  if (button) button.disabled = true;
  try {
    await action();
    clearError();
    return true;
  } catch (error) {
    showError(error);
    return false;
  } finally {
    if (button) button.disabled = false;
  }
}

const enc = encodeURIComponent;

// ---------------------------------------------------------------- sign in / out

async function signIn(event) {
  event.preventDefault();
  const key = $('signin-key').value.trim();
  if (!key) return;
  await run(async () => {
    await api('/v1/admin/stats', { key });
    sessionStorage.setItem(KEY_STORAGE, key);
    $('signin-key').value = '';
    enterApp(key);
  }, $('signin-button'));
}

function enterApp(key) {
  state.key = key;
  $('signin').hidden = true;
  $('app').hidden = false;
  route();
}

function signOut() {
  leavePage(state.page);
  sessionStorage.removeItem(KEY_STORAGE);
  state.key = null;
  state.page = null;
  state.tables = [];
  state.conversationId = null;
  resetTryOutput();
  clearError();
  for (const section of document.querySelectorAll('main.content > section')) section.hidden = true;
  $('app').hidden = true;
  $('signin').hidden = false;
  // Drop the route so that the next sign-in opens the default page.
  history.replaceState(null, '', location.pathname + location.search);
  $('signin-key').focus();
}

// ---------------------------------------------------------------- routing

const PAGES = {
  keys: { enter: enterKeys, leave: clearSecret },
  catalog: { enter: enterCatalog },
  live: { enter: startPolling, leave: stopPolling },
  experiments: { enter: startExperimentPolling, leave: stopExperimentPolling },
  try: { enter: enterTry },
};

function route() {
  if (!state.key) return;
  const page = location.hash.slice(1);
  if (!Object.prototype.hasOwnProperty.call(PAGES, page)) {
    history.replaceState(null, '', `#${DEFAULT_PAGE}`);
    route();
    return;
  }
  if (page === state.page) return;
  leavePage(state.page);
  state.page = page;
  for (const name of Object.keys(PAGES)) {
    $(`page-${name}`).hidden = name !== page;
    const link = $(`nav-${name}`);
    if (name === page) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  PAGES[page].enter();
}

function leavePage(page) {
  if (page && PAGES[page].leave) PAGES[page].leave();
}

// ---------------------------------------------------------------- Settings > API Keys

function buildScopeCheckboxes() {
  const boxes = SCOPES.map((scope) => {
    const input = el('input', { className: 'key-scope', attrs: { type: 'checkbox', value: scope } });
    return el('label', { className: 'inline' }, [input, ` ${scope}`]);
  });
  $('key-scopes').replaceChildren(...boxes);
}

function enterKeys() {
  run(loadKeys);
}

async function loadKeys() {
  const { keys } = await api('/v1/admin/keys');
  renderKeys(keys || []);
}

function describeRate(key) {
  // A key without its own quota has the node's (auth.default_rate_per_sec).
  if (key.rate_per_sec === null || key.rate_per_sec === undefined) return 'node default';
  const burst = key.burst === null || key.burst === undefined ? '' : ` (burst ${key.burst})`;
  return `${key.rate_per_sec}/s${burst}`;
}

function renderKeys(keys) {
  const rows = keys.map((key) => {
    const name = el('div', {}, [
      el('div', { text: key.name }),
      el('div', { className: 'muted small', text: key.id }),
    ]);
    const revoke = el('button', {
      className: 'key-revoke danger',
      text: 'Revoke',
      attrs: { type: 'button', 'aria-label': `Revoke ${key.name}`, 'data-key-name': key.name },
    });
    return row(
      [name, (key.scopes || []).join(', '), formatTime(key.expires_at), describeRate(key), revoke],
      { 'data-key-id': key.id },
    );
  });
  fillTableBody($('keys-table'), rows, 'No keys.');
}

function onKeysTableClick(event) {
  const button = event.target.closest('.key-revoke');
  if (!button) return;
  const id = button.closest('tr').dataset.keyId;
  const name = button.dataset.keyName;
  if (!confirm(`Revoke the key "${name}" (${id})? Clients using it will be refused.`)) return;
  run(async () => {
    await api(`/v1/admin/keys/${enc(id)}`, { method: 'DELETE' });
    await loadKeys();
  }, button);
}

/** An optional whole number from a number input: undefined when empty. */
function optionalInteger(input) {
  const raw = input.value.trim();
  if (raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value)) throw new ApiError('invalid_input', `${input.id} must be a whole number`);
  return value;
}

function newKeyBody() {
  const body = {
    name: $('key-name').value.trim(),
    scopes: [...document.querySelectorAll('.key-scope:checked')].map((box) => box.value),
  };
  const days = $('key-expiry-days').value.trim();
  if (days !== '') {
    const ms = Number(days) * 86400 * 1000;
    if (!Number.isFinite(ms)) throw new ApiError('invalid_input', 'expiry days must be a number');
    body.expires_at = new Date(Date.now() + ms).toISOString();
  }
  const rate = optionalInteger($('key-rate'));
  if (rate !== undefined) body.rate_per_sec = rate;
  const burst = optionalInteger($('key-burst'));
  if (burst !== undefined) body.burst = burst;
  return body;
}

function createKey(event) {
  event.preventDefault();
  run(async () => {
    clearSecret();
    const created = await api('/v1/admin/keys', { method: 'POST', body: newKeyBody() });
    showSecret(created.key);
    $('key-form').reset();
    await loadKeys();
  }, $('key-create'));
}

function showSecret(secret) {
  $('key-secret').textContent = secret;
  $('key-copy-status').textContent = '';
  $('key-secret-box').hidden = false;
}

/** Forgets the secret of a newly created key (it lives in the DOM only). */
function clearSecret() {
  $('key-secret').textContent = '';
  $('key-copy-status').textContent = '';
  $('key-secret-box').hidden = true;
}

function selectSecret() {
  const range = document.createRange();
  range.selectNodeContents($('key-secret'));
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
}

async function copySecret() {
  const secret = $('key-secret').textContent;
  const status = $('key-copy-status');
  try {
    await navigator.clipboard.writeText(secret);
    status.textContent = 'Copied to the clipboard.';
    return;
  } catch (_) {
    // No clipboard API (e.g. plain http): fall back to a selection.
  }
  selectSecret();
  let copied = false;
  try {
    copied = document.execCommand('copy');
  } catch (_) {
    copied = false;
  }
  status.textContent = copied ? 'Copied to the clipboard.' : 'Selected: press Ctrl+C (⌘C) to copy.';
}

// ---------------------------------------------------------------- Catalog

function enterCatalog() {
  $('remap-result').textContent = '';
  run(loadTables);
}

async function loadTables() {
  const { tables } = await api('/v1/catalog/table');
  state.tables = tables || [];
  renderTables(state.tables);
  const names = state.tables.map((table) => table.table_name);
  for (const id of ['remap-table', 'lookup-table', 'try-table']) fillSelect($(id), names);
  fillRemapFields();
}

function findTable(name) {
  return state.tables.find((table) => table.table_name === name);
}

function renderTables(tables) {
  const container = $('tables');
  if (tables.length === 0) {
    container.replaceChildren(el('p', { className: 'muted', text: 'No tables yet.' }));
    return;
  }
  container.replaceChildren(...tables.map(renderTable));
}

function renderTable(table) {
  const rows = el('p', { className: 'muted' }, [
    el('span', { className: 'table-rows', text: table.rows ?? 0 }),
    ` rows · updated ${formatTime(table.updated_at)}`,
  ]);
  const fieldRows = Object.entries(table.fields || {}).map(([name, type]) => {
    const tr = el('tr', { className: 'field', attrs: { 'data-field': name } });
    tr.append(el('td', { text: name }), el('td', { className: 'field-type', text: type }));
    return tr;
  });
  const fields = el('table', { className: 'fields' }, [
    el('thead', {}, [el('tr', {}, [el('th', { text: 'Field' }), el('th', { text: 'Type' })])]),
    el('tbody', {}, fieldRows),
  ]);
  const section = el('section', { className: 'card table-card', attrs: { 'data-table': table.table_name } }, [
    el('h4', { text: table.table_name }),
  ]);
  if (table.description) section.append(el('p', { text: table.description }));
  section.append(rows, el('div', { className: 'table-wrap' }, [fields]));
  if (Array.isArray(table.relations) && table.relations.length > 0) {
    const items = table.relations.map((relation) => el('li', { text: JSON.stringify(relation) }));
    section.append(el('p', { className: 'small', text: 'Relations' }), el('ul', { className: 'relations' }, items));
  }
  return section;
}

/** Fills the remap field select from the chosen table. */
function fillRemapFields() {
  const table = findTable($('remap-table').value);
  fillSelect($('remap-field'), Object.keys(table?.fields || {}));
  preselectRemapType();
}

/** Preselects the field's current type, when it is one of the offered types. */
function preselectRemapType() {
  const table = findTable($('remap-table').value);
  const type = table?.fields?.[$('remap-field').value];
  const select = $('remap-type');
  if ([...select.options].some((option) => option.value === type)) select.value = type;
}

function remapField(event) {
  event.preventDefault();
  const table = $('remap-table').value;
  const field = $('remap-field').value;
  if (!table || !field) return;
  const body = { type: $('remap-type').value, force: $('remap-force').checked };
  $('remap-result').textContent = '';
  run(async () => {
    const result = await api(`/v1/catalog/table/${enc(table)}/fields/${enc(field)}`, { method: 'PUT', body });
    const failed = result.failed_count ?? (result.failed || []).length;
    $('remap-result').textContent = `converted ${result.converted ?? 0}, failed ${failed}`;
    await loadTables();
  }, $('remap-submit'));
}

function lookUpItem(event) {
  event.preventDefault();
  const table = $('lookup-table').value;
  const id = $('lookup-id').value.trim();
  if (!table || !id) return;
  const output = $('lookup-result');
  output.textContent = '';
  run(async () => {
    const item = await api(`/v1/catalog/item/${enc(table)}/${enc(id)}`);
    output.textContent = JSON.stringify(item, null, 2);
  }, $('lookup-submit'));
}

// ---------------------------------------------------------------- Prometheus text format

/** Unescapes a Prometheus label value (\\, \" and \n). */
function unescapeLabel(value) {
  return value.replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
}

function parseLabels(text) {
  const labels = {};
  const pattern = /([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"/g;
  for (const match of text.matchAll(pattern)) labels[match[1]] = unescapeLabel(match[2]);
  return labels;
}

/** Parses Prometheus' text format into [{name, labels, value}]. */
function parsePrometheus(text) {
  const samples = [];
  const line = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
  for (const raw of text.split('\n')) {
    const trimmed = raw.trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    const match = line.exec(trimmed);
    if (!match) continue;
    const value = Number(match[3].replace(/^\+?Inf$/, 'Infinity'));
    samples.push({ name: match[1], labels: parseLabels(match[2] || ''), value });
  }
  return samples;
}

function series(samples, name) {
  return samples.filter((sample) => sample.name === name && !Number.isNaN(sample.value));
}

function sum(samples, name) {
  return series(samples, name).reduce((total, sample) => total + sample.value, 0);
}

// ---------------------------------------------------------------- Live

function startPolling() {
  stopPolling();
  state.lastSample = null;
  state.eventRates = [];
  state.requestRates = [];
  pollLoop(state.pollToken);
}

function stopPolling() {
  clearTimeout(state.pollTimer);
  state.pollTimer = null;
  state.pollToken++;
}

/**
 * Polls, then schedules the next poll. Once polling stopped (the token changed),
 * a late answer neither touches the error area nor schedules another poll.
 */
async function pollLoop(token) {
  const current = () => token === state.pollToken;
  try {
    await pollLive(current);
    if (current()) clearError();
  } catch (error) {
    if (current()) showError(error);
  }
  if (current()) state.pollTimer = setTimeout(() => pollLoop(token), POLL_MS);
}

async function pollLive(current) {
  const [metrics, stats] = await Promise.allSettled([
    api('/metrics', { text: true }),
    api('/v1/admin/stats'),
  ]);
  if (!current()) return; // left the page meanwhile
  const samples = metrics.status === 'fulfilled' ? parsePrometheus(metrics.value) : null;
  if (samples) renderMetrics(samples);
  if (stats.status === 'fulfilled') renderLatency(stats.value?.requests || {});
  renderModels(stats.status === 'fulfilled' ? stats.value?.models : null, samples);
  if (metrics.status === 'rejected') throw metrics.reason;
  if (stats.status === 'rejected') throw stats.reason;
}

function renderMetrics(samples) {
  recordRates(samples);
  renderActors(series(samples, 'rankstream_live_actors'));
  renderLag(series(samples, 'rankstream_kafka_consumer_lag_messages'));
}

/** Turns the counters into per-second rates against the previous poll. */
function recordRates(samples) {
  const now = {
    time: performance.now() / 1000,
    events: sum(samples, 'rankstream_events_ingested_total'),
    requests: sum(samples, 'rankstream_http_requests_total'),
  };
  const before = state.lastSample;
  const rate = (key) => {
    if (!before) return 0;
    const seconds = now.time - before.time;
    const delta = now[key] - before[key];
    return seconds > 0 && delta > 0 ? delta / seconds : 0; // a counter reset counts as 0
  };
  state.lastSample = now;
  pushPoint(state.eventRates, rate('events'));
  pushPoint(state.requestRates, rate('requests'));
  showRate('events', state.eventRates);
  showRate('requests', state.requestRates);
}

function pushPoint(points, value) {
  points.push(value);
  if (points.length > CHART_POINTS) points.splice(0, points.length - CHART_POINTS);
}

function showRate(kind, points) {
  $(`live-${kind}-rate`).textContent = points[points.length - 1].toFixed(1);
  drawChart($(`chart-${kind}`), points);
}

function svg(tag, attrs = {}) {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

/** A round upper bound for the chart's y axis: 1, 2 or 5 times a power of ten. */
function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((step) => step * power).find((bound) => bound >= value);
}

/** Draws the last CHART_POINTS values as a line, newest at the right. */
function drawChart(chart, points) {
  const [, , width, height] = chart.getAttribute('viewBox').split(' ').map(Number);
  const left = 36;
  const top = 8;
  const bottom = height - 14;
  const max = niceMax(Math.max(...points));
  const step = (width - left) / (CHART_POINTS - 1);
  const offset = CHART_POINTS - points.length;
  const coords = points.map((value, i) => {
    const x = left + (offset + i) * step;
    const y = bottom - (value / max) * (bottom - top);
    return `${x.toFixed(1)},${y.toFixed(1)}`;
  });
  const label = (y, text) => {
    const node = svg('text', { x: left - 4, y, 'text-anchor': 'end', class: 'axis-label' });
    node.textContent = text;
    return node;
  };
  chart.replaceChildren(
    svg('line', { x1: left, y1: top, x2: width, y2: top, class: 'grid' }),
    svg('line', { x1: left, y1: bottom, x2: width, y2: bottom, class: 'baseline' }),
    label(top + 4, formatNumber(max, 1)),
    label(bottom + 4, '0'),
    svg('polyline', { points: coords.join(' '), class: 'line' }),
  );
  const axis = svg('text', { x: width, y: height - 2, 'text-anchor': 'end', class: 'axis-label' });
  axis.textContent = `last ${CHART_POINTS} polls (${POLL_MS / 1000} s)`;
  chart.append(axis);
}

function renderActors(actors) {
  const shards = new Map();
  for (const sample of actors) {
    const shard = sample.labels.shard ?? '?';
    if (!shards.has(shard)) shards.set(shard, { session: 0, user: 0 });
    const kind = sample.labels.kind;
    if (kind === 'session' || kind === 'user') shards.get(shard)[kind] += sample.value;
  }
  const ordered = [...shards.entries()].sort(([a], [b]) => Number(a) - Number(b) || a.localeCompare(b));
  const rows = ordered.map(([shard, counts]) => row([shard, counts.session, counts.user]));
  fillTableBody($('actors-table'), rows, 'No live actors reported.');
}

function renderLag(lags) {
  const off = lags.length === 0;
  $('lag-off').hidden = !off;
  $('lag-wrap').hidden = off;
  const ordered = [...lags].sort((a, b) =>
    (a.labels.topic || '').localeCompare(b.labels.topic || '') ||
    Number(a.labels.partition) - Number(b.labels.partition));
  fillTableBody($('lag-table'), ordered.map((lag) => row([lag.labels.topic, lag.labels.partition, lag.value])));
}

function renderLatency(requests) {
  const ms = (value) => formatNumber(value, 2);
  const rows = Object.entries(requests)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([endpoint, s]) => row([endpoint, s.requests, ms(s.p50_ms), ms(s.p90_ms), ms(s.p99_ms), ms(s.max_ms)]));
  fillTableBody($('latency-table'), rows, 'No requests yet.');
  drawLatencyBars($('chart-latency'), requests);
}

/** The busiest endpoints' p99 (light bar) and p50 (dark bar) times, on one scale. */
function drawLatencyBars(chart, requests) {
  const busiest = Object.entries(requests)
    .sort(([, a], [, b]) => b.requests - a.requests)
    .slice(0, 8);
  const width = 640;
  const labelWidth = 210;
  const rowHeight = 18;
  const height = Math.max(1, busiest.length) * rowHeight + 14;
  chart.setAttribute('viewBox', `0 0 ${width} ${height}`);
  const max = niceMax(Math.max(0, ...busiest.map(([, s]) => s.p99_ms)));
  const scale = (ms) => ((width - labelWidth - 90) * ms) / max;
  const nodes = [];
  busiest.forEach(([endpoint, s], i) => {
    const y = i * rowHeight;
    const name = svg('text', { x: labelWidth - 6, y: y + 12, 'text-anchor': 'end', class: 'axis-label' });
    name.textContent = endpoint;
    const figures = svg('text', { x: labelWidth + scale(s.p99_ms) + 4, y: y + 12, class: 'axis-label' });
    figures.textContent = `${formatNumber(s.p50_ms, 2)} / ${formatNumber(s.p99_ms, 2)} ms`;
    nodes.push(
      name,
      svg('rect', { x: labelWidth, y: y + 3, width: scale(s.p99_ms), height: 12, class: 'bar-p99' }),
      svg('rect', { x: labelWidth, y: y + 3, width: scale(s.p50_ms), height: 12, class: 'bar-p50' }),
      figures,
    );
  });
  const axis = svg('text', { x: width, y: height - 2, 'text-anchor': 'end', class: 'axis-label' });
  axis.textContent = busiest.length ? `p50 / p99, scale to ${formatNumber(max, 1)} ms` : 'no requests yet';
  chart.replaceChildren(...nodes, axis);
}

function lastPublishedText(samples) {
  if (!samples) return 'unknown';
  const published = series(samples, 'rankstream_model_last_published_timestamp_seconds');
  const timestamp = Math.max(0, ...published.map((sample) => sample.value));
  if (!(timestamp > 0)) return 'models not published yet';
  const ago = Math.max(0, Math.round(Date.now() / 1000 - timestamp));
  return `models last published ${ago} s ago`;
}

/** The Models block: stats.models, with the metrics' gauges as a fallback. */
function renderModels(models, samples) {
  const gauge = (name) => (samples && series(samples, name).length ? sum(samples, name) : undefined);
  const m = models || {};
  const memory = typeof m.memory_bytes === 'number' ? m.memory_bytes / (1024 * 1024) : undefined;
  const ltr = m.ltr_examples === undefined ? undefined
    : `${formatNumber(m.ltr_examples)}${m.ltr_trained ? ' (trained)' : ' (not trained yet)'}`;
  const entries = [
    ['Events learned', formatNumber(m.events_learned ?? gauge('rankstream_model_events_learned'))],
    ['Items', formatNumber(m.items ?? gauge('rankstream_model_items'))],
    ['Learning-to-rank examples', ltr ?? '—'],
    ['Memory', memory === undefined ? '—' : `${formatNumber(memory, 1)} MiB`],
    ['Last published', lastPublishedText(samples)],
  ];
  const nodes = entries.flatMap(([term, value]) => [el('dt', { text: term }), el('dd', { text: value })]);
  $('models').replaceChildren(...nodes);
}

// ---------------------------------------------------------------- Try it

function enterTry() {
  updateTryKind();
  if (state.tables.length === 0) run(loadTables);
}

function updateTryKind() {
  const kind = $('try-kind').value;
  $('try-input-label').textContent = TRY_INPUT_LABELS[kind];
  $('try-input').placeholder = kind === 'recommend' ? 'ids separated by commas, spaces or new lines' : '';
  for (const node of document.querySelectorAll('.only-recommend')) node.hidden = kind !== 'recommend';
  for (const node of document.querySelectorAll('.only-chat')) node.hidden = kind !== 'chat';
}

function resetTryOutput() {
  $('try-reply').textContent = '';
  $('try-results').replaceChildren();
  showConversation();
}

function showConversation() {
  $('try-conversation').textContent = state.conversationId ? `conversation ${state.conversationId}` : '';
}

/** The fields every kind shares: the optional user and session, and the limit. */
function commonBody() {
  const body = {};
  const user = $('try-user').value.trim();
  const session = $('try-session').value.trim();
  if (user) body.user_id = user;
  if (session) body.session_id = session;
  const limit = parseInt($('try-limit').value, 10);
  body.limit = Number.isInteger(limit) && limit > 0 ? limit : 10;
  return body;
}

/** One result line: title, id, and an optional extra text (score, price, status). */
function resultItem(title, id, extra) {
  const li = el('li', { className: 'result' }, [
    el('span', { className: 'result-title', text: title }),
    el('span', { className: 'result-id', text: id }),
  ]);
  if (extra) li.append(el('span', { className: 'result-extra', text: extra }));
  return li;
}

function scoreText(score) {
  return typeof score === 'number' ? `score ${score.toFixed(4)}` : '';
}

/** An item's title from the catalog; its id when the item is not there (404). */
async function fetchTitle(table, id) {
  if (!table) return id;
  try {
    const item = await api(`/v1/catalog/item/${enc(table)}/${enc(id)}`);
    return item?.title || item?.name || id;
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return id;
    throw error;
  }
}

async function tryRecommend() {
  const body = {
    item_ids: $('try-input').value.split(/[\s,]+/).filter(Boolean),
    ...commonBody(),
    model_id: $('try-model').value.trim() || 'default',
  };
  const result = await api('/v1/recommend', { method: 'POST', body });
  const items = result.items || [];
  const table = $('try-table').value;
  const titles = await Promise.allSettled(items.map((item) => fetchTitle(table, item.id)));
  $('try-results').replaceChildren(...items.map((item, i) =>
    resultItem(titles[i].status === 'fulfilled' ? titles[i].value : item.id, item.id, scoreText(item.score))));
  const failed = titles.find((title) => title.status === 'rejected');
  if (failed) throw failed.reason; // the results stay; the error says why titles are missing
}

async function trySearch() {
  const body = { query: $('try-input').value.trim(), ...commonBody() };
  const result = await api('/v1/search', { method: 'POST', body });
  $('try-results').replaceChildren(...(result.items || []).map((item) => {
    const id = item.item_id ?? item.id;
    const title = item.metadata?.title || item.metadata?.name || id;
    return resultItem(title, id, scoreText(item.score));
  }));
}

async function tryChat() {
  const body = { message: $('try-input').value.trim(), ...commonBody() };
  if (state.conversationId) body.conversation_id = state.conversationId;
  const result = await api('/chat', { method: 'POST', body });
  state.conversationId = result.conversation_id || state.conversationId;
  showConversation();
  $('try-reply').textContent = result.message ?? '';
  $('try-results').replaceChildren(...(result.items || []).map((item) => {
    const extra = [item.price !== undefined && item.price !== null ? `price ${item.price}` : '', item.status || '']
      .filter(Boolean).join(' · ');
    return resultItem(item.title || item.item_id, item.item_id, extra);
  }));
}

const TRY_RUNNERS = { recommend: tryRecommend, search: trySearch, chat: tryChat };

function runTry(event) {
  event.preventDefault();
  const kind = $('try-kind').value;
  $('try-reply').textContent = '';
  $('try-results').replaceChildren();
  run(TRY_RUNNERS[kind], $('try-run'));
}

function newConversation() {
  state.conversationId = null;
  resetTryOutput();
}

// ---------------------------------------------------------------- Experiments

function startExperimentPolling() {
  stopExperimentPolling();
  const token = state.experimentToken;
  const loop = async () => {
    const current = () => token === state.experimentToken;
    try {
      const { experiments } = await api('/v1/admin/experiments');
      if (current()) renderExperiments(experiments || []);
    } catch (error) {
      if (current()) showError(error);
    }
    if (current()) state.experimentTimer = setTimeout(loop, POLL_MS);
  };
  loop();
}

function stopExperimentPolling() {
  state.experimentToken += 1;
  clearTimeout(state.experimentTimer);
  state.experimentTimer = null;
}

function percent(value) {
  return typeof value === 'number' && Number.isFinite(value) ? `${(value * 100).toFixed(2)}%` : '—';
}

/** A rate with its interval: `4.10% [3.20%, 5.00%]`. */
function withInterval(value, interval) {
  if (!Array.isArray(interval)) return percent(value);
  return `${percent(value)} [${percent(interval[0])}, ${percent(interval[1])}]`;
}

/** An arm's difference to the control, or `control` for the control itself. */
function difference(arm, control, key) {
  if (arm.name === control) return 'control';
  const value = arm[`${key}_diff`];
  if (typeof value !== 'number') return '—';
  const sign = value > 0 ? '+' : '';
  const interval = arm[`${key}_diff_ci`];
  const text = `${sign}${(value * 100).toFixed(2)} pt`;
  return Array.isArray(interval)
    ? `${text} [${(interval[0] * 100).toFixed(2)}, ${(interval[1] * 100).toFixed(2)}]`
    : text;
}

const ARM_COLUMNS = ['Arm', 'Model', 'Share', 'Requests', 'Impressions', 'Clicks', 'Conversions',
  'CTR (95% CI)', 'CTR vs control', 'Conversion rate (95% CI)', 'Conversions vs control'];

function renderExperiments(experiments) {
  const cards = experiments.map((experiment) => {
    const head = el('div', { className: 'chart-head' }, [
      el('h3', { text: experiment.id }),
      el('span', { className: 'muted', text: `unit ${experiment.unit} · ${experiment.status}` }),
    ]);
    if (experiment.status === 'running') {
      head.append(el('button', {
        className: 'experiment-stop danger',
        text: 'Stop',
        attrs: { type: 'button', 'data-experiment': experiment.id, 'aria-label': `Stop ${experiment.id}` },
      }));
    }
    const table = el('table', { className: 'experiment-arms', attrs: { 'data-experiment': experiment.id } }, [
      el('thead', {}, [el('tr', {}, ARM_COLUMNS.map((name) => el('th', { text: name })))]),
      el('tbody'),
    ]);
    const rows = (experiment.arms || []).map((arm) => row([
      arm.name, arm.model_id, percent(arm.share), formatNumber(arm.requests), formatNumber(arm.impressions),
      formatNumber(arm.clicks), formatNumber(arm.conversions), withInterval(arm.ctr, arm.ctr_ci),
      difference(arm, experiment.control, 'ctr'),
      withInterval(arm.conversion_rate, arm.conversion_rate_ci),
      difference(arm, experiment.control, 'conversion_rate'),
    ], { 'data-arm': arm.name }));
    fillTableBody(table, rows, 'No arms.');
    return el('div', { className: 'card experiment', attrs: { 'data-experiment': experiment.id } }, [
      head, el('div', { className: 'table-wrap' }, [table]),
    ]);
  });
  if (cards.length === 0) cards.push(el('p', { className: 'muted', text: 'No experiments yet.' }));
  $('experiments').replaceChildren(...cards);
}

/** The arms of the form: one `name model_id share` per line. */
function experimentArms() {
  return $('experiment-arms').value.split('\n').map((line) => line.trim()).filter(Boolean).map((line) => {
    const [name, modelId, share, ...rest] = line.split(/\s+/);
    const value = Number(share);
    if (!modelId || share === undefined || rest.length > 0 || !Number.isFinite(value)) {
      throw new ApiError('invalid_input', `an arm is "name model_id share", not "${line}"`);
    }
    return { name, model_id: modelId, share: value };
  });
}

function createExperiment(event) {
  event.preventDefault();
  run(async () => {
    const body = { id: $('experiment-id').value.trim(), unit: $('experiment-unit').value, arms: experimentArms() };
    await api('/v1/admin/experiments', { method: 'POST', body });
    $('experiment-form').reset();
    startExperimentPolling();
  }, $('experiment-create'));
}

function onExperimentsClick(event) {
  const button = event.target.closest('.experiment-stop');
  if (!button) return;
  const id = button.dataset.experiment;
  if (!confirm(`Stop experiment "${id}"? Every request will get its control arm.`)) return;
  run(async () => {
    await api(`/v1/admin/experiments/${enc(id)}/stop`, { method: 'POST' });
    startExperimentPolling();
  }, button);
}

// ---------------------------------------------------------------- start-up

function bindEvents() {
  $('signin-form').addEventListener('submit', signIn);
  $('signout').addEventListener('click', signOut);
  window.addEventListener('hashchange', route);

  $('keys-table').addEventListener('click', onKeysTableClick);
  $('key-form').addEventListener('submit', createKey);
  $('key-copy').addEventListener('click', copySecret);

  $('remap-table').addEventListener('change', fillRemapFields);
  $('remap-field').addEventListener('change', preselectRemapType);
  $('remap-form').addEventListener('submit', remapField);
  $('lookup-form').addEventListener('submit', lookUpItem);

  $('experiments').addEventListener('click', onExperimentsClick);
  $('experiment-form').addEventListener('submit', createExperiment);

  $('try-kind').addEventListener('change', updateTryKind);
  $('try-form').addEventListener('submit', runTry);
  $('try-new-conversation').addEventListener('click', newConversation);
}

function start() {
  buildScopeCheckboxes();
  bindEvents();
  updateTryKind();
  const key = sessionStorage.getItem(KEY_STORAGE);
  if (key) enterApp(key);
  else $('signin-key').focus();
}

start();
