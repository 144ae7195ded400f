/**
 * renderTimelinePage: the self-contained timeline viewer, as one HTML string. `runplane timeline`
 * writes it with a trace inside; the service serves it at `/inspect` in live mode.
 *
 * @module
 */
import { InvalidArgumentError } from '../errors.js';
import {
  encodeTimelineTransition,
  parseTimelineTrace,
  type TimelineTransition,
} from './timeline-transition.js';
import { timelineViewerScript } from './timeline-viewer-script.js';
import { timelineViewerStyles } from './timeline-viewer-styles.js';
import { faviconLink } from './favicon.js';

/** Options of {@link renderTimelinePage}. */
export interface TimelinePageOptions {
  /**
   * A trace to embed: JSONL text (validated) or transitions. Leave it out for a page that opens
   * a file, or goes live with `?sse=<url>` / {@link TimelinePageOptions.liveUrl}.
   */
  readonly trace?: string | readonly TimelineTransition[];
  /** The page title. @default 'runplane timeline' */
  readonly title?: string;
  /** Where the embedded trace came from, shown in the header (e.g. a file name). */
  readonly source?: string;
  /**
   * A same-origin URL of a transition SSE stream (`hub.stream(...)`) the page follows live; a
   * `?sse=` query parameter overrides it. The page sends `Authorization: Bearer <token>` when it
   * was opened with `#token=<token>` (kept in `sessionStorage`, removed from the address bar).
   */
  readonly liveUrl?: string;
  /**
   * A same-origin URL of a session's events, `{session}` standing for the session id (the
   * service's is `/api/sessions/{session}/events`). In live mode the page reads each session's
   * `user.message` events from it (same token) and labels every run with the text that started
   * it. Leave it out and runs are labelled by id.
   */
  readonly messagesUrl?: string;
}

const escapeHtml = (text: string): string =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );

/**
 * Renders the timeline viewer: one swimlane per run grouped by session, coloured segments per
 * state, markers for cancel, interrupt, preempt, escalation and timeout, details on hover, zoom
 * (buttons, `+` / `-` / `0`, Ctrl + wheel).
 *
 * @remarks
 * The page is self-contained: styles and script are inline and nothing is fetched except, in
 * live mode, the SSE stream, which must be on the page's own origin. Its Content-Security-Policy
 * forbids any other connection. Trace data is embedded as JSONL inside a
 * `<script type="application/x-ndjson">` element with every `<` escaped, and rendered as text
 * only, so ids and event names cannot inject markup.
 * @param options - {@link TimelinePageOptions}
 * @returns a complete HTML document
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`, field `trace`) when a JSONL trace has
 *   a bad line
 * @example
 * ```ts
 * const html = renderTimelinePage({ trace: readFileSync('trace.jsonl', 'utf8'), source: 'trace.jsonl' });
 * ```
 */
export function renderTimelinePage(options: TimelinePageOptions = {}): string {
  const title = options.title ?? 'runplane timeline';
  if (typeof title !== 'string') {
    throw new InvalidArgumentError(
      'title',
      `expected \`title\` to be a string, got ${typeof title}`,
    );
  }
  const transitions =
    options.trace === undefined
      ? []
      : typeof options.trace === 'string'
        ? parseTimelineTrace(options.trace)
        : options.trace;
  const jsonl = transitions
    .map((transition) => encodeTimelineTransition(transition))
    .join('\n')
    .replace(/</g, '\\u003c');
  const bodyData = [
    options.source === undefined ? '' : ` data-source="${escapeHtml(options.source)}"`,
    options.liveUrl === undefined ? '' : ` data-live-url="${escapeHtml(options.liveUrl)}"`,
    options.messagesUrl === undefined
      ? ''
      : ` data-messages-url="${escapeHtml(options.messagesUrl)}"`,
  ].join('');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src data:">
${faviconLink}
<meta name="generator" content="runplane timeline">
<title>${escapeHtml(title)}</title>
<style>${timelineViewerStyles}</style>
</head>
<body class="empty"${bodyData}>
<header>
  <h1>${escapeHtml(title)}</h1><span id="source"></span><span id="stats"></span><span id="live-status"></span>
  <div class="controls">
    <button id="zoom-out" type="button" title="Zoom out (-)">−</button>
    <button id="zoom-in" type="button" title="Zoom in (+; Ctrl + wheel)">+</button>
    <button id="zoom-fit" type="button" title="Fit to width (0)">Fit</button>
    <button id="view-recent" type="button" aria-pressed="false" title="The last minute, following new activity">Last minute</button>
    <button id="view-all" type="button" aria-pressed="true" title="Everything since the trace began">All</button>
    <label class="file">Open trace…<input id="file" type="file" accept=".jsonl,.ndjson,.json,.txt"></label>
  </div>
  <details id="legend-box" open><summary>Legend</summary><div id="legend"></div></details>
</header>
<div id="error" role="alert"></div>
<div id="empty">No transitions yet. Open a trace file (.jsonl from <code>createTimelineRecorder</code>) or drop it here.</div>
<main id="timeline" tabindex="0" aria-label="lanes"><div id="axis"></div><div id="lanes"></div></main>
<div id="tooltip" role="tooltip" hidden></div>
<script type="application/x-ndjson" id="runplane-trace">${jsonl}</script>
<script>${timelineViewerScript}</script>
</body>
</html>
`;
}
