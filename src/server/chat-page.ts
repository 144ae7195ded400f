/**
 * The chat page served at `/`: one self-contained HTML document (no CDN, no bundler, no
 * framework). Its script is {@link runChatClient} with its parts ({@link describeRunEnd},
 * {@link createLoopView}, {@link createToolCards}, {@link createEventFeed}, {@link createScrollPin},
 * {@link createRunReplies}), inlined as text.
 *
 * @module
 */
import { faviconLink, runplaneIconSvg } from '../inspect/favicon.js';
import { runChatClient } from './chat-page-client.js';
import { createEventFeed } from './chat-page-feed.js';
import { createScrollPin } from './chat-page-scroll.js';
import { createToolCards } from './chat-page-tools.js';
import { createLoopView, loopViewStyles } from './chat-page-loop.js';
import { createRunReplies } from './chat-page-reply.js';
import { runSessionList } from './chat-page-sessions.js';
import { chatPageStyles } from './chat-page-styles.js';
import { describeRunEnd } from './chat-run-end.js';

/**
 * The chat page: send; a status pill and a reason per message (completed, stopped by you,
 * preempted, timed out, stopped by shutdown, crashed); pending notices (preempting,
 * interrupting, waiting for approval); tool calls as cards with Allow / Deny; Stop on a running
 * message and Cancel on a queued one; a preempt toggle; live events over `EventSource` that
 * resume from the last `seq`. "Loop mode" before "New session" creates a loop session, whose
 * messages show the turn that consumed them ({@link createLoopView}) and which "Send now
 * (preempt)" preempts. Light and dark from `prefers-color-scheme`, from 360 px wide.
 *
 * @remarks The token comes from the URL fragment (`/#token=...`, never sent to the server),
 * then from `sessionStorage` (this tab only), or from the token form. The session id is kept in
 * `localStorage`. The list of the owner's sessions ({@link runSessionList}) opens one through
 * `window.runplaneChat.openSession(id)`.
 */
export const chatPageHtml = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>runplane chat</title>
${faviconLink}
<style>${chatPageStyles}${loopViewStyles}</style>
</head>
<body>
<header class="bar">
  <h1 class="brand">${runplaneIconSvg.replace('<svg ', '<svg aria-hidden="true" ')}runplane</h1>
  <span class="meta">Session <span id="session">-</span> <span id="session-mode" class="mode-badge" data-mode="runs">chat</span></span>
  <span class="meta conn" id="conn" data-state="offline" role="status">offline</span>
  <span class="meta">seq <span id="cursor" data-testid="cursor">0</span></span>
  <span class="spacer"></span>
  <label class="toggle"><input type="checkbox" id="loop-mode" aria-describedby="mode-hint"> Loop mode</label>
  <button id="new-session" class="button" type="button">New session</button>
  <p id="mode-hint">Loop mode: messages sent while a turn runs wait, and the next turn answers them together.</p>
</header>
<nav id="sessions" aria-label="Earlier sessions" hidden></nav>
<main tabindex="0" aria-label="Conversation">
  <div id="error" role="alert" hidden></div>
  <form id="token-form" hidden>
    <label class="visually-hidden" for="token-input">Token</label>
    <input id="token-input" placeholder="Paste the token printed by runplane serve" autocomplete="off">
    <button class="button primary" type="submit">Use token</button>
  </form>
  <div id="log" aria-live="polite"></div>
</main>
<footer>
  <form id="composer" hidden>
    <div class="field">
      <label class="visually-hidden" for="text">Message</label>
      <textarea id="text" rows="1" placeholder="Message (Enter sends)" title="Enter sends; Shift+Enter starts a new line"></textarea>
    </div>
    <label class="toggle" id="preempt-toggle" title="Stop the current reply at its next safe point and answer this one"><input type="checkbox" id="preempt"> Preempt</label>
    <button id="send-now" class="button" type="button" hidden title="Stop the running turn at its next safe point; the next turn answers this message">Send now (preempt)</button>
    <button id="send" class="button primary" type="submit">Send</button>
  </form>
</footer>
<script>
var __name = function (fn) { return fn; };
(${runSessionList.toString()})();
(${runChatClient.toString()})({
  describe: ${describeRunEnd.toString()},
  createLoop: ${createLoopView.toString()},
  createTools: ${createToolCards.toString()},
  createFeed: ${createEventFeed.toString()},
  createPin: ${createScrollPin.toString()},
  createReplies: ${createRunReplies.toString()},
});
</script>
</body>
</html>
`;
