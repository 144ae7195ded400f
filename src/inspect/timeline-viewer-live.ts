/**
 * The live half of the timeline viewer's script: Server-Sent Events read with `fetch` (so a
 * bearer token can be sent), and the labels of live runs (the text of the message that started
 * each one, from the session's event log). Spliced into `timelineViewerScript`'s function
 * body: it uses that body's variables (`model`, `live`, `messages`, `$`, `ingest`, …).
 *
 * @module
 */

/** @internal The viewer script's live part, as source text. */
export const timelineViewerLiveScript = String.raw`
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
      if (tr.actor === 'run' && !messages.has(tr.id)) wantLabels(tr);
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
    live = { url: target.href, token: liveToken(), lastArrival: 0,
      messagesUrl: document.body.dataset.messagesUrl || null, sessions: new Map() };
    $('source').textContent = 'live: ' + target.pathname;
    document.body.dataset.live = 'connecting';
    connect();
    setInterval(function () { if (model.t1 > 1e12 && model.count) scheduleRender(); }, 1000);
  }


  // ---- labels: the message that started each run (a loop turn: its number and first message) ----
  /** The session key (ownerId/sessionId) of a top-level run, or null for a nested one. */
  function sessionKeyOf(tr) {
    var actor = model.actors.get('run\u0000' + tr.id);
    var parent = actor ? actor.parentId : tr.parentId;
    return parent && !model.actors.has('run\u0000' + parent) ? parent : null;
  }

  /**
   * Reads the session's user.message and session.run_started events after its cursor (pages of
   * 200; a loop turn's run_started names the items it consumed), once at a time per
   * session; a run still unlabelled when a read ends asks again with its next transition.
   */
  function wantLabels(tr) {
    if (!live.messagesUrl) return;
    var key = sessionKeyOf(tr);
    if (!key) return;
    var state = live.sessions.get(key);
    if (!state) { state = { after: 0, busy: false, items: new Map(), turns: 0 }; live.sessions.set(key, state); }
    if (state.busy) return;
    state.busy = true;
    var sessionId = key.slice(key.indexOf('/') + 1);
    var headers = live.token ? { 'Authorization': 'Bearer ' + live.token } : {};
    function page() {
      var url = live.messagesUrl.replace('{session}', encodeURIComponent(sessionId)) +
        '?types=user.message,session.run_started&limit=200&after=' + state.after;
      return fetch(url, { headers: headers, credentials: 'same-origin', cache: 'no-store' }).then(function (response) {
        if (!response.ok) throw new Error('HTTP ' + response.status);
        return response.json();
      }).then(function (body) {
        (body.events || []).forEach(function (event) {
          var p = event && event.payload;
          if (!p) return;
          var text = typeof p.text === 'string' ? p.text.replace(/\s+/g, ' ').trim().slice(0, 120) : null;
          if (event.type === 'user.message' && text !== null) {
            if (typeof event.run_id === 'string') messages.set(event.run_id, text);
            else if (typeof p.item_id === 'string') state.items.set(p.item_id, text);
          }
          // A loop session's turn: its number in the session, and the first message it answers.
          if (event.type === 'session.run_started' && typeof event.run_id === 'string' && Array.isArray(p.item_ids)) {
            state.turns++;
            turns.set(event.run_id, 'turn ' + state.turns);
            if (state.items.has(p.item_ids[0])) messages.set(event.run_id, state.items.get(p.item_ids[0]));
          }
        });
        if (typeof body.next_after === 'number') state.after = body.next_after;
        return body.has_more === true ? page() : undefined;
      });
    }
    page().catch(function () { /* labels are a nicety: lanes keep their ids */ }).then(function () {
      state.busy = false;
      scheduleRender();
    });
  }
`;
