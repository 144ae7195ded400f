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

/**
 * Creates the server's logger.
 *
 * @param format - {@link LogFormat}; `none` gives `undefined`
 * @param options - `level` (@default 'info'); `destination`: where lines go (@default stdout,
 *   written synchronously so that no line is lost at exit)
 * @returns the logger, or `undefined` for `none`
 */
export function createServeLogger(
  format: LogFormat,
  options: { level?: LogLevel; destination?: DestinationStream } = {},
): Logger | undefined {
  if (format === 'none') return undefined;
  const settings = {
    level: options.level ?? 'info',
    base: { service: 'runplane' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (format === 'pretty') {
    // The formatter alone, in this thread: each JSON line becomes text as it is written.
    const prettify = pinoPretty.prettyFactory({
      colorize: options.destination === undefined && process.stdout.isTTY,
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: 'pid,hostname,service',
    });
    const out = options.destination ?? process.stdout;
    return pino(settings, { write: (line: string) => void out.write(prettify(line)) });
  }
  return pino(settings, options.destination ?? pino.destination({ dest: 1, sync: true }));
}
