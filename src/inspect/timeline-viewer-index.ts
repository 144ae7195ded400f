/**
 * The timeline viewer's index: what a redraw needs, kept up to date as transitions arrive, so a
 * redraw of the last minute costs what it shows, not everything the page kept since it
 * connected (README "Live timeline": **All** keeps everything; the last minute only reads it).
 * Spliced into `timelineViewerScript`'s function body: it uses that body's variables (`model`,
 * `origin`, `TERMINAL`) and `display` from the label script.
 *
 * @remarks Every transition goes, in time order, into `model.byTime` (all actors) and its actor's
 * `byTime` (its `steps`, arrival order, while the two agree); equal times keep their arrival order, as the stable sort the lanes used to make on
 * every redraw did. A lane's segments (`segs`: the steps where its look changes) grow with each
 * transition that arrives in time order and are recounted once, when drawn, after one that did
 * not. `model.live` holds the actors in a live state (a run not ended, a session not idle), and
 * `model.layout` the lane order (`layout()`, by start), kept until an actor or a parent is new.
 *
 * @module
 */

/** @internal The viewer script's index, as source text. */
export const timelineViewerIndexScript = String.raw`
  // ---- index: time-ordered transitions, live actors and the lane order, kept as they arrive ----
  function emptyModel() {
    return { actors: new Map(), count: 0, t0: Infinity, t1: -Infinity, lastId: 0,
      byTime: [], live: new Set(), layout: null };
  }

  /** The first index of a time-ordered list whose entry's t is >= t (after: > t); its length if none. */
  function searchTime(list, t, after) {
    var lo = 0, hi = list.length;
    while (lo < hi) {
      var mid = (lo + hi) >>> 1;
      if (list[mid].t < t || (after && list[mid].t === t)) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  /** Puts an entry into a time-ordered list after those of the same time; returns its index. */
  function insertByTime(list, entry) {
    var at = list.length && list[list.length - 1].t > entry.t ? searchTime(list, entry.t, true) : list.length;
    list.splice(at, 0, entry);
    return at;
  }

  /** A look changes at this step: it starts a segment of the lane. */
  function startsSegment(actor, prev, step) {
    return !prev || (step.to !== prev.to && display(actor, step.to) !== display(actor, prev.to));
  }

  /** Whether the actor's latest transition left it in a live state (a run not ended, a session not idle). */
  function isLive(actor) {
    var last = actor.steps[actor.steps.length - 1];
    return actor.kind === 'run' ? TERMINAL[last.to] !== 1 : last.to !== 'idle';
  }

  /**
   * Files a transition just pushed onto its actor's steps. While an actor's transitions arrive
   * in time order its byTime is its steps (the same array); the first that does not gets it a
   * copy of its own.
   */
  function indexStep(actor, step) {
    insertByTime(model.byTime, step);
    var steps = actor.steps, at;
    if (actor.byTime !== steps) at = insertByTime(actor.byTime, step);
    else if (steps.length > 1 && steps[steps.length - 2].t > step.t) {
      actor.byTime = steps.slice(0, -1);
      at = insertByTime(actor.byTime, step);
    } else at = steps.length - 1;
    if (at < actor.byTime.length - 1) actor.segs = null; // recounted when drawn
    else if (actor.segs && startsSegment(actor, actor.segs[actor.segs.length - 1], step)) actor.segs.push(step);
    if (isLive(actor)) model.live.add(actor); else model.live.delete(actor);
  }

  /** The steps that start the lane's segments, in time order. */
  function segmentsOf(actor) {
    if (!actor.segs) {
      actor.segs = [];
      actor.byTime.forEach(function (step) {
        if (startsSegment(actor, actor.segs[actor.segs.length - 1], step)) actor.segs.push(step);
      });
    }
    return actor.segs;
  }

  /** The left edge of the recent view: where activity begins within the last minute. */
  function recentOrigin(end) {
    var from = Math.max(model.t0, end - WINDOW_MS);
    var at = searchTime(model.byTime, from, false);
    if (at === model.byTime.length) return from;
    var first = model.byTime[at].t;
    return Math.max(from, first - (end - first) * 0.05);
  }

  /** Whether a lane has anything to show from origin on: activity there, or a live state. */
  function inView(actor) {
    return actor.steps[actor.steps.length - 1].t >= origin || isLive(actor);
  }

  /**
   * The lanes to draw from origin on, by group in lane order: only the actors with a transition
   * from origin on or in a live state are looked at; each shown group keeps its session lane.
   * Returns { groups: [{ key, lanes }], runLanes: how many run lanes the layout has }.
   */
  function lanesInView() {
    if (!model.layout) {
      var groups = layout(), at = new Map(), runLanes = 0;
      groups.forEach(function (g, gi) {
        g.lanes.forEach(function (item, li) {
          at.set(item.actor, { g: gi, i: li, item: item });
          if (item.actor.kind === 'run') runLanes++;
        });
      });
      model.layout = { groups: groups, at: at, runLanes: runLanes };
    }
    var seen = new Set(model.live), picked = [];
    for (var k = searchTime(model.byTime, origin, false); k < model.byTime.length; k++) {
      seen.add(model.actors.get(model.byTime[k].actor + '\u0000' + model.byTime[k].id));
    }
    seen.forEach(function (actor) {
      var place = model.layout.at.get(actor);
      if (place && inView(actor)) picked.push(place);
    });
    picked.sort(function (x, y) { return x.g - y.g || x.i - y.i; });
    var shown = [];
    picked.forEach(function (place) {
      var group = shown[shown.length - 1];
      if (!group || group.index !== place.g) {
        var all = model.layout.groups[place.g];
        group = { index: place.g, key: all.key, lanes: [] };
        if (place.i !== 0 && all.lanes[0] && all.lanes[0].actor.kind === 'session') group.lanes.push(all.lanes[0]);
        shown.push(group);
      }
      group.lanes.push(place.item);
    });
    return { groups: shown, runLanes: model.layout.runLanes };
  }
`;
