/**
 * The timeline viewer's styles, inlined into every page `renderTimelinePage` writes: light and
 * dark (`prefers-color-scheme`), text on every state colour at a contrast of at least 4.5:1.
 *
 * @remarks Lanes are plain blocks: no `content-visibility`, whose skipped rendering lost every
 * lane once a zoomed track grew wider than the reserved box (only the axis was left).
 *
 * @module
 */

/** Styles of the viewer page. */
export const timelineViewerStyles = String.raw`
:root { --label-w: 240px; --lane-h: 22px; --px: 1; font: 13px/1.35 system-ui, sans-serif;
  color-scheme: light dark;
  --fg: #1f2933; --bg: #fff; --panel: #f5f7fa; --line: #e4e7eb; --edge: #9aa5b1; --muted: #52606d;
  --hover: #f0f4f8; --control: #fff; color: var(--fg); }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e4e7eb; --bg: #12161a; --panel: #1e252b; --line: #323f4b; --edge: #616e7c;
    --muted: #a9b4bf; --hover: #1a2229; --control: #1e252b; }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); display: flex; flex-direction: column; height: 100vh; }
header { flex: none; z-index: 5; background: var(--panel); border-bottom: 1px solid var(--line); padding: 8px 12px; }
header h1 { font-size: 16px; margin: 0 12px 0 0; display: inline-block; }
#source, #stats, #live-status { color: var(--muted); margin-right: 12px; }
.controls { display: inline-flex; flex-wrap: wrap; gap: 6px; align-items: center; margin-top: 4px; }
.controls button, .controls label.file { font: inherit; color: inherit; padding: 2px 8px; border: 1px solid var(--edge); border-radius: 4px; background: var(--control); cursor: pointer; }
.controls button[aria-pressed="true"] { background: #1a66c9; border-color: #1a66c9; color: #fff; }
.controls button:focus-visible, .controls label.file:focus-within { outline: 2px solid #1a66c9; outline-offset: 1px; }
.controls input[type=file] { position: absolute; width: 1px; height: 1px; opacity: 0; }
#legend { margin-top: 6px; display: flex; flex-wrap: wrap; gap: 4px 12px; color: var(--fg); }
#legend .item { display: inline-flex; align-items: center; gap: 4px; }
#legend .swatch { width: 14px; height: 10px; border-radius: 2px; display: inline-block; }
#error { display: none; background: #ffe3e3; color: #8a041a; padding: 6px 12px; border-bottom: 1px solid #f29b9b; }
#error.show { display: block; }
#empty { padding: 40px; color: var(--muted); text-align: center; display: none; }
body.empty #empty { display: block; }
body.dragging { outline: 3px dashed #1a66c9; outline-offset: -6px; }
#timeline { overflow: auto; position: relative; flex: 1 1 auto; min-height: 0; }
#legend-box summary { cursor: pointer; color: var(--muted); margin-top: 4px; width: max-content; }
#axis, #lanes { width: max-content; min-width: 100%; }
#axis { position: sticky; top: 0; z-index: 3; height: 22px; background: var(--bg); border-bottom: 1px solid var(--line); display: flex; }
#axis .corner { position: sticky; left: 0; z-index: 4; width: var(--label-w); min-width: var(--label-w); background: var(--bg); border-right: 1px solid var(--line); padding: 2px 8px; color: var(--muted); }
#axis .ticks { position: relative; flex: none; }
#axis .tick { position: absolute; top: 0; height: 22px; border-left: 1px solid var(--edge); padding-left: 3px; color: var(--muted); font-size: 11px; white-space: nowrap; }
#hidden-note { padding: 4px 8px; color: var(--muted); }
.group { border-bottom: 1px solid var(--line); }
.lane { display: flex; height: var(--lane-h); align-items: stretch; }
.lane:hover { background: var(--hover); }
.lane .label { position: sticky; left: 0; z-index: 2; display: flex; align-items: center; gap: 4px; width: var(--label-w); min-width: var(--label-w); background-color: var(--bg); border-right: 1px solid var(--line); padding: 0 8px 0 calc(8px + var(--depth, 0) * 14px); white-space: nowrap; overflow: hidden; font-size: 12px; }
.lane .label .name { flex: 0 1 auto; min-width: 0; overflow: hidden; text-overflow: ellipsis; }
.lane .label .ordinal { flex: none; color: var(--muted); font-family: ui-monospace, monospace; }
.lane.session-lane .label { font-weight: 600; background-color: var(--panel); }
.lane .badge { flex: none; font-size: 10px; padding: 0 4px; margin-left: 4px; border-radius: 3px; color: #fff; }
.lane .badge.st-idle, .lane .badge.st-busy, .lane .badge.st-QUEUED, .lane .badge.st-interrupting, .lane .badge.st-loop-waiting { color: #1f2933; }
.track { position: relative; flex: none; width: calc(var(--span, 0) * var(--px) * 1px + 80px); }
.seg { position: absolute; top: 3px; bottom: 3px; left: calc(var(--start) * var(--px) * 1px); width: max(2px, calc(var(--len) * var(--px) * 1px)); border-radius: 2px; overflow: hidden; white-space: nowrap; font-size: 10px; line-height: 16px; padding-left: 3px; color: #fff; cursor: default; }
.seg.terminal { width: 12px; border-radius: 2px 6px 6px 2px; }
.marker { position: absolute; top: 1px; left: calc(var(--start) * var(--px) * 1px - 8px); width: 16px; height: 16px; border-radius: 50%; border: 2px solid #fff; z-index: 1; color: #fff; font: bold 9px/12px system-ui, sans-serif; text-align: center; box-shadow: 0 0 0 1px rgba(0,0,0,.35); }
.st-CREATED { background: #616e7c; }
.st-QUEUED { background: #f0b429; color: #3d2b00; }
.st-RUNNING { background: #1a66c9; }
.st-cancelling { background: repeating-linear-gradient(135deg, #f2994a 0 6px, #d9772b 6px 12px); color: #1f2933; }
.st-COMPLETED { background: #1d7a43; }
.st-FAILED { background: #c4212c; }
.st-CANCELLED { background: #7d3c98; }
.st-unwinding { background: repeating-linear-gradient(135deg, #9b59b6 0 6px, #7d3c98 6px 12px); }
.st-abandoned { background: #4a1d5e; }
.st-idle { background: #e4e7eb; color: #3e4c59; }
.st-busy { background: #a0c4ff; color: #102a43; }
.st-interrupting { background: repeating-linear-gradient(135deg, #f2994a 0 6px, #a0c4ff 6px 12px); color: #102a43; }
.st-loop-loading { background: #616e7c; }
.st-loop-waiting { background: #cbd2d9; color: #1f2933; }
.st-loop-turn { background: #0b7285; }
.st-loop-exiting { background: #8d6e1f; }
.st-loop-exited { background: #3e4c59; }
.st-other { background: #616e7c; }
@media (prefers-color-scheme: dark) {
  /* Idle and waiting are the quiet states: muted, never the brightest thing on screen. */
  .st-idle, .st-loop-waiting, .lane .badge.st-idle, .lane .badge.st-loop-waiting { background: #323f4b; color: #d9e2ec; }
}
.mk-cancel { background: #c4212c; }
.mk-interrupt { background: #0b7285; }
.mk-preempt { background: #c2255c; }
.mk-escalation { background: #111; color: #ffd43b; }
.mk-timeout { background: #8d6e1f; }
#tooltip { position: fixed; z-index: 10; pointer-events: none; background: #1f2933; color: #f5f7fa; padding: 6px 8px; border-radius: 4px; font-size: 12px; max-width: 460px; white-space: pre; font-family: ui-monospace, monospace; }
#tooltip[hidden] { display: none; }
@media (max-width: 600px) { :root { --label-w: 150px; } .lane .badge { display: none; } }
`;
