/**
 * The timeline viewer's lane looks and labels: the look (class name) of each actor's state, and
 * what a lane's label says. Spliced into `timelineViewerScript`'s function body: it uses that
 * body's variables (`messages`, `turns`).
 *
 * @module
 */

/** @internal The viewer script's looks and labels, as source text. */
export const timelineViewerLabelScript = String.raw`
  // A turn loop's states (its machine's loop region) by the look each one gets.
  var LOOP_LOOKS = { idle: 'loop-waiting', route: 'loop-waiting', waiting: 'loop-waiting',
    loading: 'loop-loading', discarding: 'loop-exiting', exiting: 'loop-exiting', exited: 'loop-exited' };

  /** The class-name state of a lane segment: what it looks like. */
  function display(actor, state) {
    if (actor.kind === 'session') {
      if (state === 'idle') return 'idle';
      return state === 'interrupting' ? 'interrupting' : 'busy';
    }
    if (actor.kind === 'turn-loop') {
      var region = state.split('.')[0];
      return /^turn-/.test(region) ? 'loop-turn' : LOOP_LOOKS[region] || 'other';
    }
    if (actor.kind === 'run') {
      if (state === 'cancelling') return 'cancelling';
      if (state === 'CANCELLED.unwinding') return 'unwinding';
      if (state === 'CANCELLED.abandoned') return 'abandoned';
      var top = state.split('.')[0];
      if (['CREATED', 'QUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED'].indexOf(top) >= 0) return top;
    }
    return 'other';
  }

  function shortId(actor) {
    return actor.kind === 'run' && actor.id.length > 12 ? actor.id.slice(0, 10) + '…' : actor.id;
  }

  /**
   * What a lane's label says: a run, its turn (loop sessions) and the message that started it,
   * else its id; a turn loop, the session it serves ('loop · session 1a2b3c4d').
   */
  function laneText(actor) {
    if (actor.kind === 'turn-loop') {
      var session = (actor.parentId || '').slice((actor.parentId || '').indexOf('/') + 1);
      return 'loop · session ' + (session.length > 8 ? session.slice(0, 8) : session);
    }
    var turn = turns.has(actor.id) ? turns.get(actor.id) : '';
    if (messages.has(actor.id)) return (turn ? turn + ' · ' : '') + '“' + messages.get(actor.id) + '”';
    if (turn) return turn;
    return (actor.kind === 'run' ? '' : actor.kind + ' ') + shortId(actor);
  }
`;
