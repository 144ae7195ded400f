/**
 * The structured logger of `runplane serve` (pino): JSON lines with levels, or a human-readable
 * form for a terminal (pino-pretty, in process: no worker thread). README "Observability".
 *
 * @module
 */
import { pino, type DestinationStream, type Logger } from 'pino';
import pinoPretty from 'pino-pretty';

/** How `runplane serve` logs requests and run ends: `json` lines, `pretty` text, or `none`. */
export type LogFormat = 'json' | 'pretty' | 'none';

/** The log formats, for validation. */
export const logFormats: readonly LogFormat[] = ['json', 'pretty', 'none'];

/** The pino levels `--log-level` accepts. */
export const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** A pino level. */
export type LogLevel = (typeof logLevels)[number];

/** What stdout may hold unwritten before lines are dropped, in bytes (1 MiB). */
const logBufferBytes = 1_048_576;

/** The server's logger and what became of its lines. */
export interface ServeLogger {
  readonly logger: Logger;
  /** Lines dropped so far because stdout was not read fast enough (its buffer was full). */
  readonly dropped: () => number;
  /**
   * Resolves once the lines written so far have left the buffer, or after `timeoutMs` (a
   * reader that stopped reading cannot hold a shutdown longer).
   */
  flush(timeoutMs: number): Promise<void>;
}

/**
 * Creates the server's logger.
 *
 * @remarks On stdout the lines are written asynchronously through a buffer of at most
 * 1 MiB (sonic-boom's `maxLength`): a reader that stops reading (`serve > fifo`,
 * its reader stopped) costs dropped lines, counted by `dropped()` and `onDrop`, never a server
 * that blocks in a write.
 * @param format - {@link LogFormat}; `none` gives `undefined`
 * @param options - `level` (@default 'info'); `destination`: where lines go (@default stdout,
 *   through the bounded buffer); `onDrop`: called for each line dropped
 * @returns the logger, or `undefined` for `none`
 */
export function createServeLogger(
  format: LogFormat,
  options: { level?: LogLevel; destination?: DestinationStream; onDrop?: () => void } = {},
): ServeLogger | undefined {
  if (format === 'none') return undefined;
  const settings = {
    level: options.level ?? 'info',
    base: { service: 'runplane' },
    timestamp: pino.stdTimeFunctions.isoTime,
    // `"level":"info"`, not pino's number 30: what log pipelines and people read.
    formatters: { level: (label: string) => ({ level: label }) },
  };
  let dropped = 0;
  /** Bytes handed to the buffer and not yet written (or dropped). */
  let pending = 0;
  const boom =
    options.destination === undefined
      ? pino.destination({ dest: 1, sync: false, maxLength: logBufferBytes })
      : undefined;
  boom?.on('write', (bytes: number) => (pending -= bytes));
  boom?.on('drop', (line: string) => {
    pending -= Buffer.byteLength(line);
    dropped += 1;
    options.onDrop?.();
  });
  const out: DestinationStream = boom ?? (options.destination as DestinationStream);
  const write = (line: string) => {
    if (boom !== undefined) pending += Buffer.byteLength(line);
    out.write(line);
  };
  // pretty: the formatter alone, in this thread: each JSON line becomes text as it is written.
  const prettify =
    format === 'pretty'
      ? pinoPretty.prettyFactory({
          colorize: options.destination === undefined && process.stdout.isTTY,
          translateTime: 'SYS:HH:MM:ss.l',
          ignore: 'pid,hostname,service',
        })
      : undefined;
  const logger = pino(settings, {
    write: prettify === undefined ? write : (line: string) => write(prettify(line)),
  });
  return {
    logger,
    dropped: () => dropped,
    flush: (timeoutMs) =>
      boom === undefined || pending <= 0
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            const timer = setTimeout(done, timeoutMs);
            timer.unref();
            function done() {
              clearTimeout(timer);
              boom?.off('drain', done);
              resolve();
            }
            boom.once('drain', done);
          }),
  };
}
