/**
 * The chat page's styles: light and dark (`prefers-color-scheme`), one colour per run outcome,
 * from 360 px wide up, with visible keyboard focus.
 *
 * @module
 */

/** @internal The chat page's CSS. */
export const chatPageStyles = `
:root {
  color-scheme: light dark;
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  --bg: #f6f7f9; --surface: #fff; --fg: #1f2933; --muted: #52606d; --line: #d9dee4;
  --accent: #1a66c9; --accent-fg: #fff; --focus: #1a66c9; --user: #1a66c9; --user-fg: #fff;
  --sent-bg: #e4e7eb; --sent-fg: #3e4c59;
  --queued-bg: #fff3c4; --queued-fg: #6b4300;
  --running-bg: #dbeafe; --running-fg: #1e4fa3;
  --completed-bg: #d3f4e0; --completed-fg: #17603a;
  --stopped-bg: #e6e0f8; --stopped-fg: #4c3a8f;
  --replaced-bg: #fbe0ef; --replaced-fg: #8c1d59;
  --timed-out-bg: #fde8d7; --timed-out-fg: #8a3b00;
  --shutdown-bg: #dde3ea; --shutdown-fg: #243b53;
  --crashed-bg: #fde2e2; --crashed-fg: #9b1c1c;
  --failed-bg: #fff0f0; --failed-fg: #b42318;
  --cancelled-bg: #eceff3; --cancelled-fg: #3e4c59;
  --pending-bg: #ffedd5; --pending-fg: #8a2c0d;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #111418; --surface: #1b2026; --fg: #e4e7eb; --muted: #a9b4bf; --line: #323f4b;
    --accent: #5b9bf0; --accent-fg: #0b1a2e; --focus: #8ab8ff; --user: #23497d; --user-fg: #eef4ff;
    --sent-bg: #323f4b; --sent-fg: #e4e7eb;
    --queued-bg: #4d3800; --queued-fg: #ffe08a;
    --running-bg: #17335c; --running-fg: #bcd7ff;
    --completed-bg: #0f3d25; --completed-fg: #9fe5bd;
    --stopped-bg: #30275a; --stopped-fg: #d4c9ff;
    --replaced-bg: #4d1533; --replaced-fg: #ffc2e2;
    --timed-out-bg: #4d2600; --timed-out-fg: #ffcc99;
    --shutdown-bg: #243b53; --shutdown-fg: #d9e2ec;
    --crashed-bg: #5c1111; --crashed-fg: #ffc9c9;
    --failed-bg: #451a1a; --failed-fg: #ffb4ab;
    --cancelled-bg: #2b333c; --cancelled-fg: #d0d7de;
    --pending-bg: #4a2508; --pending-fg: #ffd0a8;
  }
}
* { box-sizing: border-box; }
[hidden] { display: none !important; }
html, body { height: 100%; }
body { margin: 0; display: flex; flex-direction: column; height: 100dvh; background: var(--bg); color: var(--fg); }
:focus-visible { outline: 2px solid var(--focus); outline-offset: 2px; }
.bar { display: flex; flex-wrap: wrap; gap: .4rem .9rem; align-items: center; padding: .55rem 1rem; background: var(--surface); border-bottom: 1px solid var(--line); }
.brand { display: flex; align-items: center; gap: .45rem; margin: 0; font-size: 1.05rem; font-weight: 650; }
.brand svg { width: 22px; height: 22px; }
.meta { font-size: .8rem; color: var(--muted); min-width: 0; display: flex; gap: .3rem; align-items: center; }
#session { font-family: ui-monospace, monospace; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; max-width: 12ch; }
.conn::before { content: ""; display: inline-block; width: .55rem; height: .55rem; border-radius: 50%; margin-right: .3rem; background: var(--muted); }
.conn[data-state="live"]::before { background: #1d9a55; }
.conn[data-state="reconnecting"]::before, .conn[data-state="connecting"]::before { background: #d9822b; }
.conn[data-state="closed"]::before { background: #c4212c; }
.spacer { flex: 1 1 0; }
.button { font: inherit; font-size: .9rem; padding: .4rem .85rem; border-radius: .5rem; border: 1px solid var(--line); background: var(--surface); color: var(--fg); cursor: pointer; min-height: 2.25rem; }
.button:hover { border-color: var(--muted); }
.button.primary { background: var(--accent); border-color: var(--accent); color: var(--accent-fg); font-weight: 600; }
.button.small { font-size: .8rem; padding: .2rem .6rem; min-height: 1.9rem; }
.button:disabled { opacity: .6; cursor: default; }
main { flex: 1 1 auto; overflow-y: auto; padding: 1rem 1rem 2.5rem; scroll-padding-bottom: 2.5rem; }
#log { display: flex; flex-direction: column; gap: 1.1rem; max-width: 46rem; margin: 0 auto; }
#error { max-width: 46rem; margin: 0 auto .8rem; padding: .5rem .8rem; border-radius: .5rem; background: var(--crashed-bg); color: var(--crashed-fg); }
#token-form { max-width: 46rem; margin: 2rem auto; display: flex; flex-wrap: wrap; gap: .5rem; }
#token-form input { flex: 1 1 14rem; min-width: 0; font: inherit; padding: .45rem .6rem; border-radius: .5rem; border: 1px solid var(--line); background: var(--surface); color: var(--fg); }
.empty { color: var(--muted); text-align: center; margin-top: 3rem; white-space: pre-wrap; }
.turn { display: flex; flex-direction: column; gap: .35rem; }
.user { display: flex; justify-content: flex-end; }
.bubble { margin: 0; padding: .55rem .8rem; border-radius: .9rem; white-space: pre-wrap; overflow-wrap: anywhere; max-width: min(36rem, 88%); }
.user-text { background: var(--user); color: var(--user-fg); border-bottom-right-radius: .25rem; }
.reply { display: flex; flex-direction: column; gap: .45rem; align-items: flex-start; }
.reply .text { background: var(--surface); border: 1px solid var(--line); border-bottom-left-radius: .25rem; }
.meta-row { display: flex; flex-wrap: wrap; gap: .4rem; align-items: center; justify-content: flex-end; font-size: .78rem; }
.pill, .pending { display: inline-flex; align-items: center; gap: .3rem; padding: .1rem .55rem; border-radius: 999px; font-weight: 600; background: var(--sent-bg); color: var(--sent-fg); }
.pill[data-status="queued"] { background: var(--queued-bg); color: var(--queued-fg); }
.pill[data-status="running"] { background: var(--running-bg); color: var(--running-fg); }
.pill[data-status="running"]::before, .pending::before { content: ""; width: .45rem; height: .45rem; border-radius: 50%; background: currentColor; animation: pulse 1.2s ease-in-out infinite; }
.pill[data-outcome="completed"] { background: var(--completed-bg); color: var(--completed-fg); }
.pill[data-outcome="stopped"] { background: var(--stopped-bg); color: var(--stopped-fg); }
.pill[data-outcome="replaced"] { background: var(--replaced-bg); color: var(--replaced-fg); }
.pill[data-outcome="timed-out"] { background: var(--timed-out-bg); color: var(--timed-out-fg); }
.pill[data-outcome="shutdown"] { background: var(--shutdown-bg); color: var(--shutdown-fg); }
.pill[data-outcome="crashed"] { background: var(--crashed-bg); color: var(--crashed-fg); }
.pill[data-outcome="failed"] { background: var(--failed-bg); color: var(--failed-fg); }
.pill[data-outcome="cancelled"] { background: var(--cancelled-bg); color: var(--cancelled-fg); }
.pending { background: var(--pending-bg); color: var(--pending-fg); }
@keyframes pulse { 50% { opacity: .35; } }
@media (prefers-reduced-motion: reduce) { .pill::before, .pending::before { animation: none; } }
.actions { display: inline-flex; gap: .3rem; align-items: center; }
.note { color: var(--muted); }
.resumed { margin: 0; font-size: .8rem; font-style: italic; color: var(--muted); }
.reason { margin: 0; font-size: .85rem; color: var(--muted); border-left: 3px solid var(--line); padding-left: .6rem; }
.turn[data-outcome="replaced"] .reason { border-color: var(--replaced-fg); }
.turn[data-outcome="stopped"] .reason { border-color: var(--stopped-fg); }
.turn[data-outcome="timed-out"] .reason { border-color: var(--timed-out-fg); }
.turn[data-outcome="shutdown"] .reason { border-color: var(--shutdown-fg); }
.turn[data-outcome="crashed"] .reason, .turn[data-outcome="failed"] .reason { border-color: var(--crashed-fg); }
.tool { width: min(30rem, 100%); border: 1px solid var(--line); border-radius: .7rem; background: var(--surface); padding: .5rem .75rem; font-size: .88rem; }
.tool[data-state="approval"] { border-color: var(--pending-fg); }
.tool-head { display: flex; align-items: center; gap: .45rem; }
.tool-icon { width: 1rem; height: 1rem; border-radius: .25rem; background: var(--accent); flex: none; }
.tool-name { font-family: ui-monospace, monospace; font-weight: 600; }
.tool-state { margin-left: auto; font-size: .75rem; color: var(--muted); }
.tool[data-state="approval"] .tool-state { color: var(--pending-fg); font-weight: 600; }
.tool[data-state="denied"] .tool-state, .tool[data-state="error"] .tool-state { color: var(--crashed-fg); font-weight: 600; }
.tool-fields { display: grid; grid-template-columns: max-content 1fr; gap: .1rem .7rem; margin: .4rem 0 0; }
.tool-fields dt { color: var(--muted); }
.tool-fields dd { margin: 0; font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
.tool-text { margin: .4rem 0 0; font-family: ui-monospace, monospace; overflow-wrap: anywhere; white-space: pre-wrap; }
.muted { color: var(--muted); font-family: inherit; }
.tool-actions { display: flex; gap: .4rem; margin-top: .5rem; }
.tool-result { margin-top: .45rem; padding-top: .4rem; border-top: 1px dashed var(--line); }
.tool-result-label { font-size: .75rem; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
.supplement { margin: 0; font-style: italic; color: var(--muted); text-align: right; }
#composer { display: flex; flex-wrap: wrap; gap: .5rem; align-items: flex-end; padding: .6rem 1rem; background: var(--surface); border-top: 1px solid var(--line); }
#composer .field { flex: 1 1 16rem; min-width: 0; display: flex; }
#text { flex: 1; min-width: 0; min-height: 2.6rem; max-height: 10rem; resize: vertical; font: inherit; padding: .5rem .7rem; border-radius: .6rem; border: 1px solid var(--line); background: var(--bg); color: var(--fg); }
.toggle { display: inline-flex; align-items: center; gap: .35rem; font-size: .85rem; color: var(--muted); min-height: 2.25rem; }
.toggle input { width: 1.1rem; height: 1.1rem; accent-color: var(--accent); }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
@media (max-width: 480px) {
  .bar { padding: .45rem .7rem; }
  main { padding: .7rem .7rem 2.5rem; }
  #composer { padding: .5rem .7rem; }
  #composer .field { flex-basis: 100%; }
  #send { margin-left: auto; }
  .bubble { max-width: 94%; }
}
#sessions { padding: 0 1rem; background: var(--surface); border-bottom: 1px solid var(--line); }
#sessions details { padding: .35rem 0; }
#sessions summary { cursor: pointer; font-size: .9rem; color: var(--fg); min-height: 2rem; display: flex; align-items: center; }
.session-list { list-style: none; margin: .3rem 0; padding: 0; display: grid; gap: .25rem; max-height: 40vh; overflow-y: auto; }
.session-link { font: inherit; width: 100%; text-align: left; display: flex; flex-wrap: wrap; justify-content: space-between; gap: .2rem .8rem; padding: .45rem .6rem; border-radius: .45rem; border: 1px solid var(--line); background: var(--bg); color: var(--fg); cursor: pointer; min-height: 2.25rem; }
.session-link:hover { border-color: var(--muted); }
.session-link[aria-current="true"] { border-color: var(--accent); }
.session-title { overflow-wrap: anywhere; min-width: 0; }
.session-time { font-size: .8rem; color: var(--muted); }
`;
