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

import { timelineViewerIndexScript } from './timeline-viewer-index.js';
import { timelineViewerLabelScript } from './timeline-viewer-labels.js';
import { timelineViewerLiveScript } from './timeline-viewer-live.js';

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
    ['interrupting', 'session interrupting'], ['loop-loading', 'loop loading its checkpoint'],
    ['loop-waiting', 'loop waiting for messages'], ['loop-turn', 'loop turn'],
    ['loop-exiting', 'loop stopping'], ['loop-exited', 'loop stopped']];

  var $ = function (id) { return document.getElementById(id); };
  var WINDOW_MS = 60000;   // the "recent" view: the last minute
  var model = emptyModel(); // see the index part below
  var px = null;          // pixels per ms; null = fit to width
  var userZoomed = false;
  var view = 'all';        // 'recent' (the last minute, following new activity) or 'all'
  var origin = 0;          // the clock time (ms) at the left edge of every track
  var messages = new Map(); // run id → the text of the message that started it (live pages)
  var turns = new Map();    // run id of a loop session's turn → 'turn N' (live pages)
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
    model = emptyModel();
    px = null; userZoomed = false; origin = 0;
  }

  function ingest(tr) {
    var key = tr.actor + '\u0000' + tr.id;
    var actor = model.actors.get(key);
    if (!actor) {
      actor = { kind: tr.actor, id: tr.id, parentId: tr.parentId || null, steps: [], order: model.actors.size,
        segs: [] };
      actor.byTime = actor.steps;
      model.actors.set(key, actor);
      model.layout = null;
    }
    if (tr.parentId && !actor.parentId) { actor.parentId = tr.parentId; model.layout = null; }
    actor.steps.push(tr); // arrival order
    indexStep(actor, tr);
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

  /** A tick label: as many decimals as the tick step needs, minutes as m:ss. */
  function fmtTick(ms, step) {
    var decimals = step >= 1000 ? 0 : step >= 100 ? 1 : step >= 10 ? 2 : 3;
    if (ms < 60000) return (step >= 1000 ? String(Math.round(ms / 1000)) : (ms / 1000).toFixed(decimals)) + ' s';
    var minutes = Math.floor(ms / 60000), seconds = (ms - minutes * 60000) / 1000;
    var text = decimals ? seconds.toFixed(decimals) : String(Math.round(seconds));
    return minutes + ':' + (seconds < 10 ? '0' : '') + text;
  }

  function fmtMs(ms) {
    if (Math.abs(ms) < 1000) return (Math.round(ms * 10) / 10) + ' ms';
    if (Math.abs(ms) < 60000) return (Math.round(ms / 10) / 100) + ' s';
    return (Math.round(ms / 600) / 100) + ' min';
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
      // Ordinals count every run of the session this page has seen, in start order, so a lane
      // keeps its number when the view hides older ones: #2, and #2.1 for its first nested run.
      var visit = function (a, depth, ordinal) {
        lanes.push({ actor: a, depth: depth, ordinal: ordinal });
        (children.get(a.id) || []).sort(byStart).forEach(function (c, i) { visit(c, depth + 1, ordinal + '.' + (i + 1)); });
      };
      g.runs.sort(byStart).forEach(function (a, i) { visit(a, 0, '#' + (i + 1)); });
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
    if (messages.has(actor.id)) lines.push('message  ' + messages.get(actor.id));
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
    var steps = actor.byTime;
    var last = steps[steps.length - 1];
    lane.dataset.state = last.to;
    lane.dataset.status = last.to.split('.')[0];
    if (last.cause) lane.dataset.cause = last.cause;
    var label = el('div', 'label');
    label.title = actor.kind + ' ' + actor.id + (actor.parentId ? '  (parent ' + actor.parentId + ')' : '') +
      (messages.has(actor.id) ? '\n' + messages.get(actor.id) : '');
    if (item.ordinal) label.appendChild(el('span', 'ordinal', item.ordinal));
    label.appendChild(el('span', 'name', laneText(actor)));
    var look = display(actor, last.to);
    var badge = el('span', 'badge st-' + look, actor.kind === 'run' ? last.to.split('.')[0] :
      look === 'other' ? last.to : look.replace(/^loop-/, ''));
    label.appendChild(badge);
    lane.appendChild(label);
    var track = el('div', 'track');
    // A segment per state entered (session states that look alike merge); a step that kept the
    // state (an interrupt) only adds a marker. Tracks start at the view's origin: a segment that
    // ended before it is not drawn (those come first: the search skips them), one that began
    // before it is cut at it.
    var segs = segmentsOf(actor);
    for (var i = Math.max(0, searchTime(segs, origin, false) - 1); i < segs.length; i++) {
      var step = segs[i], next = segs[i + 1];
      var stop = next ? next.t : end;
      if (stop < origin || (!next && TERMINAL[step.to] === 1 && step.t < origin)) continue;
      var look = display(actor, step.to);
      var seg = el('div', 'seg st-' + look + (!next && TERMINAL[step.to] === 1 ? ' terminal' : ''), look);
      seg.dataset.state = step.to;
      seg.dataset.display = look;
      seg.style.setProperty('--start', String(Math.max(step.t, origin) - origin));
      seg.style.setProperty('--len', String(Math.max(0, stop - Math.max(step.t, origin))));
      seg.dataset.tip = String(tips.push(tipFor(actor, step, next, end)) - 1);
      track.appendChild(seg);
    }
    steps.slice(searchTime(steps, origin, false)).forEach(function (step) {
      // Markers show requests; a safe point where a pending cancel lands is not a new one.
      var kind = step.cause ? MARKERS[step.cause] : undefined;
      if (!kind || step.from === null || step.event === 'run.safe_point' || step.t < origin) return;
      var mark = el('div', 'marker mk-' + kind, LETTERS[kind]);
      mark.dataset.marker = kind;
      mark.dataset.cause = step.cause;
      mark.style.setProperty('--start', String(step.t - origin));
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
    // Tick labels are times since the trace began, at round values even when the view does not.
    var from = origin - model.t0;
    for (var t = Math.ceil(from / step) * step; t <= from + span + step / 2; t += step) {
      var tick = el('div', 'tick', step < 1 ? fmtMs(t) : fmtTick(t, step));
      tick.style.left = ((t - from) * px) + 'px';
      ticks.appendChild(tick);
    }
    var axis = $('axis');
    axis.replaceChildren(el('div', 'corner', view === 'recent' ? 'last minute' : 'all'), ticks);
  }

  function labelWidth() {
    return parseFloat(getComputedStyle(document.documentElement).getPropertyValue('--label-w')) || 240;
  }

  /** The width (px) a fitted track gets: the box less the label and a margin. */
  function trackWidth() {
    var box = $('timeline').clientWidth;
    return Math.max(100, box - labelWidth() - (box < 600 ? 30 : 90));
  }

  function fitPx(span) {
    return span > 0 ? trackWidth() / span : 1;
  }

  function setView(next) {
    view = next;
    userZoomed = false;
    $('view-recent').setAttribute('aria-pressed', String(view === 'recent'));
    $('view-all').setAttribute('aria-pressed', String(view === 'all'));
    document.body.dataset.view = view;
    render();
    $('timeline').scrollLeft = 0;
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
    // A zoom keeps its origin; otherwise the view decides it (the recent view follows "now").
    if (!userZoomed) origin = view === 'recent' ? recentOrigin(end) : model.t0;
    // A zoom while following keeps the right edge at "now": the window is what the track holds.
    else if (view === 'recent') origin = Math.max(model.t0, end - trackWidth() / px);
    var span = Math.max(end - origin, 1);
    if (px === null || !userZoomed) px = fitPx(span);
    document.documentElement.style.setProperty('--px', String(px));
    document.documentElement.style.setProperty('--span', String(span));
    var inViewNow = lanesInView(); // only what is in view, in lane order (the index part below)
    var frag = document.createDocumentFragment();
    var runCount = 0, shownGroups = 0;
    inViewNow.groups.forEach(function (g) {
      var lanes = g.lanes;
      shownGroups++;
      var section = el('section', 'group');
      section.dataset.session = g.key;
      if (lanes.length === 0 || lanes[0].actor.kind !== 'session') {
        var header = el('div', 'lane session-lane');
        header.dataset.laneId = g.key;
        header.dataset.actor = 'session';
        var headerLabel = el('div', 'label');
        headerLabel.appendChild(el('span', 'name', 'session ' + g.key));
        header.appendChild(headerLabel);
        header.appendChild(el('div', 'track'));
        section.appendChild(header);
      }
      lanes.forEach(function (item) {
        if (item.actor.kind === 'run') runCount++;
        section.appendChild(buildLane(item, end));
      });
      frag.appendChild(section);
    });
    var hidden = inViewNow.runLanes - runCount;
    if (hidden > 0) {
      var note = el('div', '', hidden + (hidden === 1 ? ' run' : ' runs') + ' ended before this view; press “All” to see them.');
      note.id = 'hidden-note';
      frag.appendChild(note);
    }
    lanesBox.replaceChildren(frag);
    renderAxis(span);
    $('stats').textContent = runCount + ' runs · ' + shownGroups + ' sessions · ' + model.count +
      ' transitions · ' + fmtMs(span);
    document.body.dataset.ready = 'true';
    document.body.dataset.transitions = String(model.count);
    document.body.dataset.hiddenRuns = String(hidden);
  }

  function scheduleRender() {
    if (renderQueued) return;
    renderQueued = true;
    requestAnimationFrame(render);
  }

  function zoom(factor, anchorX) {
    var box = $('timeline');
    var span = Math.max(endTime() - origin, 1);
    if (px === null) px = fitPx(span);
    var x = anchorX === undefined ? box.clientWidth / 2 : anchorX;
    var w = labelWidth();
    var tAt = (box.scrollLeft + x - w) / px;
    px = Math.min(Math.max(px * factor, 1e-7), 200);
    userZoomed = true;
    document.body.dataset.zoom = String(px);
    if (view === 'recent') {
      render(); // following: the right edge stays at "now", whatever the anchor
      box.scrollLeft = 0;
      return;
    }
    // Positions are CSS calc() of --px: zooming restyles, it does not rebuild the lanes.
    document.documentElement.style.setProperty('--px', String(px));
    renderAxis(span);
    box.scrollLeft = Math.max(0, tAt * px - x + w);
    document.body.dataset.zoom = String(px);
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
    $('view-recent').addEventListener('click', function () { setView('recent'); });
    $('view-all').addEventListener('click', function () { setView('all'); });
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

${timelineViewerLabelScript}
${timelineViewerIndexScript}
${timelineViewerLiveScript}
  legend();
  if (window.innerWidth < 600) $('legend-box').open = false; // small screens: lanes first
  wire();
  setView('all');
  var embedded = $('runplane-trace');
  var params = new URLSearchParams(location.search);
  var liveUrl = params.get('sse') || document.body.dataset.liveUrl;
  if (liveUrl) {
    setView('recent'); // live: the last minute, following new activity
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
