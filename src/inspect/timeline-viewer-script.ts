/**
 * The timeline viewer's browser code and styles, inlined into every page `renderTimelinePage`
 * writes. Plain ES2020 with no imports: the page must work from a file, offline.
 *
 * @remarks Kept as strings (not compiled from TypeScript) so the page is the same under `tsx`,
 * vitest and the built package. The browser tests in `test/inspect/timeline-browser.test.ts` are
 * what check it; `test/inspect/timeline-page.test.ts` at least parses it.
 * The script never uses `innerHTML` with trace data: ids and events from a trace are text only.
 *
 * @module
 */

/** Styles of the viewer page. */
export const timelineViewerStyles = String.raw`
:root { --label-w: 240px; --lane-h: 22px; --px: 1; font: 13px/1.35 system-ui, sans-serif; color: #1f2933; }
* { box-sizing: border-box; }
body { margin: 0; background: #fff; }
header { position: sticky; top: 0; z-index: 5; background: #f5f7fa; border-bottom: 1px solid #cbd2d9; padding: 8px 12px; }
header h1 { font-size: 16px; margin: 0 12px 0 0; display: inline-block; }
#source, #stats, #live-status { color: #52606d; margin-right: 12px; }
.controls { display: inline-flex; gap: 6px; align-items: center; margin-top: 4px; }
.controls button, .controls label.file { font: inherit; padding: 2px 8px; border: 1px solid #9aa5b1; border-radius: 4px; background: #fff; cursor: pointer; }
.controls input[type=file] { display: none; }
#legend { margin-top: 6px; display: flex; flex-wrap: wrap; gap: 4px 12px; color: #3e4c59; }
#legend .item { display: inline-flex; align-items: center; gap: 4px; }
#legend .swatch { width: 14px; height: 10px; border-radius: 2px; display: inline-block; }
#error { display: none; background: #ffe3e3; color: #8a041a; padding: 6px 12px; border-bottom: 1px solid #f29b9b; }
#error.show { display: block; }
#empty { padding: 40px; color: #616e7c; text-align: center; display: none; }
body.empty #empty { display: block; }
body.dragging { outline: 3px dashed #2f80ed; outline-offset: -6px; }
#timeline { overflow: auto; position: relative; height: calc(100vh - 96px); }
#axis, #lanes { width: max-content; min-width: 100%; }
#axis { position: sticky; top: 0; z-index: 3; height: 22px; background: #fff; border-bottom: 1px solid #e4e7eb; display: flex; }
#axis .corner { position: sticky; left: 0; z-index: 4; width: var(--label-w); min-width: var(--label-w); background: #fff; border-right: 1px solid #e4e7eb; padding: 2px 8px; color: #7b8794; }
#axis .ticks { position: relative; flex: none; }
#axis .tick { position: absolute; top: 0; height: 22px; border-left: 1px solid #cbd2d9; padding-left: 3px; color: #616e7c; font-size: 11px; white-space: nowrap; }
.group { border-bottom: 1px solid #e4e7eb; content-visibility: auto; }
.lane { display: flex; height: var(--lane-h); align-items: stretch; }
.lane:hover { background: #f0f4f8; }
.lane .label { position: sticky; left: 0; z-index: 2; width: var(--label-w); min-width: var(--label-w); background: inherit; background-color: #fff; border-right: 1px solid #e4e7eb; padding: 2px 8px 0 calc(8px + var(--depth, 0) * 14px); white-space: nowrap; overflow: hidden; text-overflow: ellipsis; font-family: ui-monospace, monospace; font-size: 12px; }
.lane.session-lane .label { font-weight: 600; font-family: inherit; background-color: #f5f7fa; }
.lane .badge { font-family: system-ui, sans-serif; font-size: 10px; padding: 0 4px; margin-left: 4px; border-radius: 3px; color: #fff; }
.lane .badge.st-idle, .lane .badge.st-busy, .lane .badge.st-QUEUED, .lane .badge.st-interrupting { color: #1f2933; }
.track { position: relative; flex: none; width: calc(var(--span, 0) * var(--px) * 1px + 80px); }
.seg { position: absolute; top: 3px; bottom: 3px; left: calc(var(--start) * var(--px) * 1px); width: max(2px, calc(var(--len) * var(--px) * 1px)); border-radius: 2px; overflow: hidden; white-space: nowrap; font-size: 10px; line-height: 16px; padding-left: 3px; color: #fff; cursor: default; }
.seg.terminal { width: 12px; border-radius: 2px 6px 6px 2px; }
.marker { position: absolute; top: 1px; left: calc(var(--start) * var(--px) * 1px - 8px); width: 16px; height: 16px; border-radius: 50%; border: 2px solid #fff; z-index: 1; color: #fff; font: bold 9px/12px system-ui, sans-serif; text-align: center; box-shadow: 0 0 0 1px rgba(0,0,0,.35); }
.st-CREATED { background: #9aa5b1; }
.st-QUEUED { background: #f0b429; color: #3d2b00; }
.st-RUNNING { background: #2f80ed; }
.st-cancelling { background: repeating-linear-gradient(135deg, #f2994a 0 6px, #d9772b 6px 12px); }
.st-COMPLETED { background: #27ae60; }
.st-FAILED { background: #e12d39; }
.st-CANCELLED { background: #8e44ad; }
.st-unwinding { background: repeating-linear-gradient(135deg, #b57edc 0 6px, #8e44ad 6px 12px); }
.st-abandoned { background: #4a1d5e; }
.st-idle { background: #e4e7eb; color: #52606d; }
.st-busy { background: #a0c4ff; color: #102a43; }
.st-interrupting { background: repeating-linear-gradient(135deg, #f2994a 0 6px, #a0c4ff 6px 12px); color: #102a43; }
.st-other { background: #616e7c; }
.mk-cancel { background: #e12d39; }
.mk-interrupt { background: #0b7285; }
.mk-preempt { background: #c2255c; }
.mk-escalation { background: #111; color: #ffd43b; }
.mk-timeout { background: #8d6e1f; }
#tooltip { position: fixed; z-index: 10; pointer-events: none; background: #1f2933; color: #f5f7fa; padding: 6px 8px; border-radius: 4px; font-size: 12px; max-width: 460px; white-space: pre; font-family: ui-monospace, monospace; }
#tooltip[hidden] { display: none; }
`;

/** The viewer's script: builds lanes from a trace (embedded, opened, dropped or live over SSE). */
export const timelineViewerScript = String.raw`
(function () {
  'use strict';
  var TERMINAL = { 'COMPLETED': 1, 'FAILED': 1, 'CANCELLED.settled': 1, 'CANCELLED.abandoned': 1 };
  var MARKERS = { cancel: 'cancel', signal: 'cancel', shutdown: 'cancel', interrupt: 'interrupt',
    preempt: 'preempt', escalation: 'escalation', timeout: 'timeout' };
  var LETTERS = { cancel: 'C', interrupt: 'I', preempt: 'P', escalation: 'E', timeout: 'T' };
  var LEGEND_STATES = [['CREATED', 'CREATED'], ['QUEUED', 'QUEUED'], ['RUNNING', 'RUNNING'],
    ['cancelling', 'cancelling'], ['COMPLETED', 'COMPLETED'], ['FAILED', 'FAILED'],
    ['CANCELLED', 'CANCELLED'], ['unwinding', 'CANCELLED, agent unwinding'],
    ['abandoned', 'CANCELLED, agent abandoned'], ['idle', 'session idle'], ['busy', 'session busy'],
    ['interrupting', 'session interrupting']];

  var $ = function (id) { return document.getElementById(id); };
  var model = { actors: new Map(), count: 0, t0: Infinity, t1: -Infinity, lastId: 0 };
  var px = null;          // pixels per ms; null = fit to width
  var userZoomed = false;
  var tips = [];           // tooltip texts, indexed by data-tip
  var renderQueued = false;
  var live = null;         // { url, token, lastArrival }

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function showError(message) {
    var box = $('error');
    box.textContent = message;
    box.className = message ? 'show' : '';
  }

  function reset() {
    model = { actors: new Map(), count: 0, t0: Infinity, t1: -Infinity, lastId: 0 };
    px = null; userZoomed = false;
  }

  function ingest(tr) {
    var key = tr.actor + '\u0000' + tr.id;
    var actor = model.actors.get(key);
    if (!actor) {
      actor = { kind: tr.actor, id: tr.id, parentId: tr.parentId || null, steps: [], order: model.actors.size };
      model.actors.set(key, actor);
    }
    if (tr.parentId && !actor.parentId) actor.parentId = tr.parentId;
    actor.steps.push(tr);
    model.count++;
    if (tr.t < model.t0) model.t0 = tr.t;
    if (tr.t > model.t1) model.t1 = tr.t;
  }

  function parseTrace(text) {
    var lines = text.split('\n');
    var out = [];
    for (var i = 0; i < lines.length; i++) {
      var line = lines[i].trim();
      if (!line) continue;
      var tr;
      try { tr = JSON.parse(line); } catch (e) { throw new Error('line ' + (i + 1) + ' is not JSON'); }
      if (!tr || typeof tr.t !== 'number' || typeof tr.id !== 'string' || typeof tr.to !== 'string' ||
          ['run', 'session', 'turn-loop'].indexOf(tr.actor) < 0) {
        throw new Error('line ' + (i + 1) + ' is not a timeline transition');
      }
      out.push({ t: tr.t, actor: tr.actor, id: tr.id, parentId: tr.parentId || null,
        from: tr.from == null ? null : tr.from, to: tr.to, event: String(tr.event || ''),
        cause: tr.cause == null ? null : tr.cause });
    }
    return out;
  }

  function load(text, source) {
    reset();
    showError('');
    try {
      parseTrace(text).forEach(ingest);
    } catch (e) {
      showError('Cannot read the trace: ' + e.message);
    }
    $('source').textContent = source;
    render();
  }

  /** The class-name state of a lane segment: what it looks like. */
  function display(actor, state) {
    if (actor.kind === 'session') {
      if (state === 'idle') return 'idle';
      return state.indexOf('active.interrupting') === 0 ? 'interrupting' : 'busy';
    }
    if (actor.kind === 'run') {
      if (state === 'RUNNING.cancelling') return 'cancelling';
      if (state === 'CANCELLED.unwinding') return 'unwinding';
      if (state === 'CANCELLED.abandoned') return 'abandoned';
      var top = state.split('.')[0];
      if (['CREATED', 'QUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED'].indexOf(top) >= 0) return top;
    }
    return 'other';
  }

  function fmtMs(ms) {
    if (Math.abs(ms) < 1000) return (Math.round(ms * 10) / 10) + ' ms';
    if (Math.abs(ms) < 60000) return (Math.round(ms / 10) / 100) + ' s';
    return (Math.round(ms / 600) / 100) + ' min';
  }

  function shortId(actor) {
    return actor.kind === 'run' && actor.id.length > 12 ? actor.id.slice(0, 10) + '…' : actor.id;
  }

  function endTime() {
    var end = model.t1;
    if (live && live.lastArrival && model.t1 > 1e12) end += Date.now() - live.lastArrival;
    return end;
  }

  /** Groups lanes: session → its turn loops and top-level runs → nested runs, depth first. */
  function layout() {
    var runs = new Map(), groups = new Map(), children = new Map();
    model.actors.forEach(function (a) { if (a.kind === 'run') runs.set(a.id, a); });
    function group(key) {
      var g = groups.get(key);
      if (!g) { g = { key: key, session: null, loops: [], runs: [], first: Infinity }; groups.set(key, g); }
      return g;
    }
    function sessionOf(a, seen) {
      var p = a.parentId;
      if (p && runs.has(p) && !seen.has(p)) { seen.add(p); return sessionOf(runs.get(p), seen); }
      return p || '(no session)';
    }
    model.actors.forEach(function (a) {
      var first = a.steps[0].t;
      if (a.kind === 'session') { var gs = group(a.id); gs.session = a; gs.first = Math.min(gs.first, first); return; }
      if (a.kind === 'run' && a.parentId && runs.has(a.parentId)) {
        if (!children.has(a.parentId)) children.set(a.parentId, []);
        children.get(a.parentId).push(a);
        return;
      }
      var g = group(a.kind === 'run' ? sessionOf(a, new Set()) : (a.parentId || '(no session)'));
      g.first = Math.min(g.first, first);
      (a.kind === 'run' ? g.runs : g.loops).push(a);
    });
    var byStart = function (x, y) { return x.steps[0].t - y.steps[0].t || x.order - y.order; };
    var list = Array.from(groups.values()).sort(function (x, y) { return x.first - y.first; });
    return list.map(function (g) {
      var lanes = [];
      if (g.session) lanes.push({ actor: g.session, depth: 0 });
      g.loops.sort(byStart).forEach(function (a) { lanes.push({ actor: a, depth: 0 }); });
      var visit = function (a, depth) {
        lanes.push({ actor: a, depth: depth });
        (children.get(a.id) || []).sort(byStart).forEach(function (c) { visit(c, depth + 1); });
      };
      g.runs.sort(byStart).forEach(function (a) { visit(a, 0); });
      return { key: g.key, lanes: lanes };
    });
  }

  function tipFor(actor, step, next, end) {
    var lines = [actor.kind + ' ' + actor.id];
    if (actor.parentId) lines.push('parent   ' + actor.parentId);
    lines.push('state    ' + step.to);
    lines.push('from     ' + (step.from == null ? '(start)' : step.from));
    lines.push('event    ' + step.event);
    if (step.cause) lines.push('cause    ' + step.cause);
    lines.push('at       ' + fmtMs(step.t - model.t0) + '  (t=' + step.t + ')');
    if (TERMINAL[step.to]) lines.push('final');
    else lines.push('lasted   ' + fmtMs((next ? next.t : end) - step.t) + (next ? '' : ' (so far)'));
    return lines.join('\n');
  }

  function markerTip(actor, step, kind) {
    return kind.toUpperCase() + '\n' + actor.kind + ' ' + actor.id + '\n' + (step.from == null ? '(start)' : step.from) +
      ' → ' + step.to + '\nevent    ' + step.event + '\ncause    ' + step.cause + '\nat       ' + fmtMs(step.t - model.t0);
  }

  function buildLane(item, end) {
    var actor = item.actor;
    var lane = el('div', 'lane ' + actor.kind + '-lane');
    lane.dataset.laneId = actor.id;
    lane.dataset.actor = actor.kind;
    lane.style.setProperty('--depth', String(item.depth));
    var steps = actor.steps.slice().sort(function (x, y) { return x.t - y.t; });
    var last = steps[steps.length - 1];
    lane.dataset.state = last.to;
    lane.dataset.status = last.to.split('.')[0];
    if (last.cause) lane.dataset.cause = last.cause;
    var label = el('div', 'label');
    label.title = actor.kind + ' ' + actor.id + (actor.parentId ? '  (parent ' + actor.parentId + ')' : '');
    label.appendChild(document.createTextNode((actor.kind === 'run' ? '' : actor.kind + ' ') + shortId(actor)));
    var badge = el('span', 'badge st-' + display(actor, last.to), actor.kind === 'run' ? last.to.split('.')[0] : last.to);
    label.appendChild(badge);
    lane.appendChild(label);
    var track = el('div', 'track');
    // A segment per state entered (session states that look alike merge); a step that kept the
    // state (an interrupt) only adds a marker.
    var segs = [];
    steps.forEach(function (step, i) {
      var prev = segs[segs.length - 1];
      if (i === 0 || (step.to !== prev.to && display(actor, step.to) !== display(actor, prev.to))) segs.push(step);
    });
    segs.forEach(function (step, i) {
      var next = segs[i + 1];
      var look = display(actor, step.to);
      var seg = el('div', 'seg st-' + look + (!next && TERMINAL[step.to] === 1 ? ' terminal' : ''), look);
      seg.dataset.state = step.to;
      seg.dataset.display = look;
      seg.style.setProperty('--start', String(step.t - model.t0));
      seg.style.setProperty('--len', String(Math.max(0, (next ? next.t : end) - step.t)));
      seg.dataset.tip = String(tips.push(tipFor(actor, step, next, end)) - 1);
      track.appendChild(seg);
    });
    steps.forEach(function (step) {
      // Markers show requests; a safe point where a pending cancel lands is not a new one.
      var kind = step.cause ? MARKERS[step.cause] : undefined;
      if (!kind || step.from === null || step.event === 'run.safe_point') return;
      var mark = el('div', 'marker mk-' + kind, LETTERS[kind]);
      mark.dataset.marker = kind;
      mark.dataset.cause = step.cause;
      mark.style.setProperty('--start', String(step.t - model.t0));
      mark.dataset.tip = String(tips.push(markerTip(actor, step, kind)) - 1);
      track.appendChild(mark);
    });
    lane.appendChild(track);
    return lane;
  }

  function niceStep(msPerPx) {
    var target = msPerPx * 90, pow = Math.pow(10, Math.floor(Math.log10(Math.max(target, 1e-6))));
    var options = [1, 2, 5, 10];
    for (var i = 0; i < options.length; i++) if (options[i] * pow >= target) return options[i] * pow;
    return 10 * pow;
  }

  function trackWidth(span) { return Math.ceil(span * px) + 80; }

  function renderAxis(span) {
    var ticks = el('div', 'ticks');
    ticks.style.width = trackWidth(span) + 'px';
    var step = niceStep(1 / px);
    for (var t = 0; t <= span + step / 2; t += step) {
      var tick = el('div', 'tick', fmtMs(t));
      tick.style.left = (t * px) + 'px';
      ticks.appendChild(tick);
    }
    var axis = $('axis');
    axis.replaceChildren(el('div', 'corner', 'lanes'), ticks);
  }

  function fitPx(span) {
    var avail = Math.max(200, $('timeline').clientWidth - 240 - 100);
    return span > 0 ? avail / span : 1;
  }

  function render() {
    renderQueued = false;
    tips = [];
    var lanesBox = $('lanes');
    if (model.count === 0) {
      document.body.classList.add('empty');
      lanesBox.replaceChildren();
      $('axis').replaceChildren();
      $('stats').textContent = '';
      document.body.dataset.ready = 'true';
      document.body.dataset.transitions = '0';
      return;
    }
    document.body.classList.remove('empty');
    var end = endTime();
    var span = Math.max(end - model.t0, 1);
    if (px === null || !userZoomed) px = fitPx(span);
    document.documentElement.style.setProperty('--px', String(px));
    document.documentElement.style.setProperty('--span', String(span));
    var groups = layout();
    var frag = document.createDocumentFragment();
    var runCount = 0;
    groups.forEach(function (g) {
      var section = el('section', 'group');
      section.dataset.session = g.key;
      // Off-screen groups skip style and layout (big traces): they reserve their height.
      var headed = g.lanes.length > 0 && g.lanes[0].actor.kind === 'session';
      section.style.containIntrinsicBlockSize = 'auto ' + ((g.lanes.length + (headed ? 0 : 1)) * 22 + 1) + 'px';
      if (!headed) {
        var header = el('div', 'lane session-lane');
        header.dataset.laneId = g.key;
        header.dataset.actor = 'session';
        header.appendChild(el('div', 'label', 'session ' + g.key));
        header.appendChild(el('div', 'track'));
        section.appendChild(header);
      }
      g.lanes.forEach(function (item) {
        if (item.actor.kind === 'run') runCount++;
        section.appendChild(buildLane(item, end));
      });
      frag.appendChild(section);
    });
    lanesBox.replaceChildren(frag);
    renderAxis(span);
    $('stats').textContent = runCount + ' runs · ' + groups.length + ' sessions · ' + model.count +
      ' transitions · ' + fmtMs(span);
    document.body.dataset.ready = 'true';
    document.body.dataset.transitions = String(model.count);
  }

  function scheduleRender() {
    if (renderQueued) return;
    renderQueued = true;
    requestAnimationFrame(render);
  }

  function zoom(factor, anchorX) {
    var box = $('timeline');
    var span = Math.max(endTime() - model.t0, 1);
    if (px === null) px = fitPx(span);
    var x = anchorX === undefined ? box.clientWidth / 2 : anchorX;
    var tAt = (box.scrollLeft + x - 240) / px;
    px = Math.min(Math.max(px * factor, 1e-7), 200);
    userZoomed = true;
    // Positions are CSS calc() of --px: zooming restyles, it does not rebuild the lanes.
    document.documentElement.style.setProperty('--px', String(px));
    renderAxis(span);
    box.scrollLeft = Math.max(0, tAt * px - x + 240);
  }

  function legend() {
    var box = $('legend');
    LEGEND_STATES.forEach(function (entry) {
      var item = el('span', 'item');
      item.appendChild(el('span', 'swatch st-' + entry[0]));
      item.appendChild(document.createTextNode(entry[1]));
      box.appendChild(item);
    });
    Object.keys(LETTERS).forEach(function (kind) {
      var item = el('span', 'item');
      var mark = el('span', 'marker mk-' + kind, LETTERS[kind]);
      mark.style.position = 'static';
      mark.style.display = 'inline-block';
      item.appendChild(mark);
      item.appendChild(document.createTextNode(kind));
      box.appendChild(item);
    });
  }

  function wire() {
    $('zoom-in').addEventListener('click', function () { zoom(2); });
    $('zoom-out').addEventListener('click', function () { zoom(0.5); });
    $('zoom-fit').addEventListener('click', function () { userZoomed = false; render(); $('timeline').scrollLeft = 0; });
    $('timeline').addEventListener('wheel', function (e) {
      if (!e.ctrlKey && !e.metaKey) return;
      e.preventDefault();
      zoom(e.deltaY < 0 ? 1.25 : 0.8, e.clientX - $('timeline').getBoundingClientRect().left);
    }, { passive: false });
    document.addEventListener('keydown', function (e) {
      if (e.target && /INPUT|TEXTAREA/.test(e.target.tagName)) return;
      if (e.key === '+' || e.key === '=') zoom(2);
      else if (e.key === '-') zoom(0.5);
      else if (e.key === '0') { userZoomed = false; render(); }
    });
    var tooltip = $('tooltip');
    $('lanes').addEventListener('mouseover', function (e) {
      var target = e.target.closest ? e.target.closest('[data-tip]') : null;
      if (!target) { tooltip.hidden = true; return; }
      tooltip.textContent = tips[Number(target.dataset.tip)] || '';
      tooltip.hidden = false;
    });
    $('lanes').addEventListener('mousemove', function (e) {
      tooltip.style.left = Math.min(e.clientX + 14, window.innerWidth - tooltip.offsetWidth - 4) + 'px';
      tooltip.style.top = Math.min(e.clientY + 14, window.innerHeight - tooltip.offsetHeight - 4) + 'px';
    });
    $('lanes').addEventListener('mouseleave', function () { tooltip.hidden = true; });
    $('file').addEventListener('change', function (e) {
      var file = e.target.files && e.target.files[0];
      if (file) file.text().then(function (text) { load(text, file.name); });
    });
    document.addEventListener('dragover', function (e) { e.preventDefault(); document.body.classList.add('dragging'); });
    document.addEventListener('dragleave', function () { document.body.classList.remove('dragging'); });
    document.addEventListener('drop', function (e) {
      e.preventDefault();
      document.body.classList.remove('dragging');
      var file = e.dataTransfer && e.dataTransfer.files[0];
      if (file) file.text().then(function (text) { load(text, file.name); });
    });
  }

  // ---- live: Server-Sent Events read with fetch, so a bearer token can be sent ----
  function liveToken() {
    var match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
    if (match) {
      try { sessionStorage.setItem('runplane.token', decodeURIComponent(match[1])); } catch (e) { /* private mode */ }
      history.replaceState(null, '', location.pathname + location.search);
    }
    try { return sessionStorage.getItem('runplane.token'); } catch (e) { return null; }
  }

  function connect() {
    var headers = { 'Accept': 'text/event-stream' };
    if (live.token) headers['Authorization'] = 'Bearer ' + live.token;
    if (model.lastId) headers['Last-Event-ID'] = String(model.lastId);
    $('live-status').textContent = 'connecting…';
    fetch(live.url, { headers: headers, credentials: 'same-origin', cache: 'no-store' }).then(function (response) {
      if (response.status === 401 || response.status === 403) {
        document.body.dataset.live = 'unauthorized';
        $('live-status').textContent = 'not authorized (HTTP ' + response.status + '): open this page as ' +
          location.pathname + '#token=<your token>';
        return;
      }
      if (!response.ok || !response.body) throw new Error('HTTP ' + response.status);
      $('live-status').textContent = 'live';
      document.body.dataset.live = 'open';
      var reader = response.body.getReader();
      var decoder = new TextDecoder();
      var buffer = '';
      function pump() {
        return reader.read().then(function (chunk) {
          if (chunk.done) throw new Error('stream ended');
          buffer += decoder.decode(chunk.value, { stream: true }).replace(/\r\n?/g, '\n');
          var cut;
          while ((cut = buffer.indexOf('\n\n')) >= 0) {
            frame(buffer.slice(0, cut));
            buffer = buffer.slice(cut + 2);
          }
          return pump();
        });
      }
      return pump();
    }).catch(function (error) {
      document.body.dataset.live = 'closed';
      $('live-status').textContent = 'disconnected (' + error.message + '), retrying…';
      setTimeout(connect, 2000);
    });
  }

  function frame(text) {
    var event = 'message', data = [], id = null;
    text.split('\n').forEach(function (line) {
      if (!line || line[0] === ':') return;
      var colon = line.indexOf(':');
      var field = colon < 0 ? line : line.slice(0, colon);
      var value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
      else if (field === 'id') id = value;
    });
    if (id !== null && /^\d+$/.test(id)) model.lastId = Number(id);
    if (event !== 'transition' || !data.length) return;
    try {
      var tr = JSON.parse(data.join('\n'));
      ingest({ t: tr.t, actor: tr.actor, id: tr.id, parentId: tr.parentId || null, from: tr.from == null ? null : tr.from,
        to: tr.to, event: String(tr.event || ''), cause: tr.cause == null ? null : tr.cause });
      live.lastArrival = Date.now();
      scheduleRender();
    } catch (e) {
      showError('Bad live frame: ' + e.message);
    }
  }

  function startLive(url) {
    var target;
    try { target = new URL(url, location.href); } catch (e) { showError('Bad live URL: ' + url); return; }
    if (target.origin !== location.origin) {
      showError('The live URL must be on this page\'s origin (' + location.origin + '), got ' + target.origin);
      return;
    }
    live = { url: target.href, token: liveToken(), lastArrival: 0 };
    $('source').textContent = 'live: ' + target.pathname;
    document.body.dataset.live = 'connecting';
    connect();
    setInterval(function () { if (model.t1 > 1e12 && model.count) scheduleRender(); }, 1000);
  }

  legend();
  wire();
  var embedded = $('runplane-trace');
  var params = new URLSearchParams(location.search);
  var liveUrl = params.get('sse') || document.body.dataset.liveUrl;
  if (liveUrl) {
    render();
    startLive(liveUrl);
  } else if (embedded && embedded.textContent.trim()) {
    load(embedded.textContent, document.body.dataset.source || 'embedded trace');
  } else {
    $('source').textContent = 'no trace loaded';
    render();
  }
  window.addEventListener('resize', function () { if (!userZoomed) scheduleRender(); });
})();
`;
