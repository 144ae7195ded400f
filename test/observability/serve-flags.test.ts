/**
 * The observability flags of `runplane serve` (README "Flags") and the logger's two forms: JSON
 * lines, and human-readable text for a terminal.
 */
import { describe, expect, it } from 'vitest';
import { createServeLogger } from '../../src/observability/logger.js';
import { parseServeArgs, serveOptionsUsage } from '../../src/server/serve-command.js';

describe('observability flags', () => {
  it('reads --metrics-token, --metrics-port, --log-format and --log-level over their variables', () => {
    const env = {
      RUNPLANE_METRICS_TOKEN: 'env-metrics',
      RUNPLANE_METRICS_PORT: '9464',
      RUNPLANE_LOG_FORMAT: 'pretty',
      RUNPLANE_LOG_LEVEL: 'warn',
    };
    expect(parseServeArgs([], env)).toMatchObject({
      metricsToken: 'env-metrics',
      metricsPort: 9464,
      logFormat: 'pretty',
      logLevel: 'warn',
    });
    expect(
      parseServeArgs(
        [
          '--metrics-token',
          'flag-metrics',
          '--metrics-port',
          '0',
          '--log-format',
          'none',
          '--log-level',
          'debug',
        ],
        env,
      ),
    ).toMatchObject({
      metricsToken: 'flag-metrics',
      metricsPort: 0,
      logFormat: 'none',
      logLevel: 'debug',
    });
    expect(parseServeArgs([], {})).toMatchObject({
      metricsToken: undefined,
      metricsPort: undefined,
      logFormat: undefined,
    });
    expect(() => parseServeArgs(['--log-format', 'xml'], {})).toThrow(
      'expected `log-format` to be one of json, pretty, none, got "xml"',
    );
    expect(() => parseServeArgs(['--log-level', 'loud'], {})).toThrow(/`log-level`/);
    expect(() => parseServeArgs(['--metrics-port', '70000'], {})).toThrow(/`metrics-port`/);
    expect(() => parseServeArgs(['--metrics-token', ' '], {})).toThrow(/`--metrics-token`/);
    expect(parseServeArgs([], {}).traceparent).toBeUndefined();
    expect(parseServeArgs(['--metrics-host', '0.0.0.0'], {}).metricsHost).toBe('0.0.0.0');
    expect(parseServeArgs([], { RUNPLANE_METRICS_HOST: '::1' }).metricsHost).toBe('::1');
    expect(parseServeArgs([], { RUNPLANE_TRACEPARENT: 'link' }).traceparent).toBe('link');
    expect(
      parseServeArgs(['--traceparent', 'ignore'], { RUNPLANE_TRACEPARENT: 'link' }).traceparent,
    ).toBe('ignore');
    expect(() => parseServeArgs(['--traceparent', 'child'], {})).toThrow(
      'expected `traceparent` to be one of parent, link, ignore, got "child"',
    );
    for (const flag of [
      '--metrics-token',
      '--metrics-port',
      '--log-format',
      '--log-level',
      '--traceparent',
      '--metrics-host',
    ]) {
      expect(serveOptionsUsage).toContain(flag);
    }
  });

  it('logs JSON lines with levels, or text for a terminal, or nothing', () => {
    const json: string[] = [];
    createServeLogger('json', { destination: { write: (line) => json.push(line) } })?.logger.info(
      { run_id: 'r1' },
      'run ended',
    );
    expect(JSON.parse(json[0] ?? '')).toMatchObject({
      level: 'info',
      msg: 'run ended',
      run_id: 'r1',
    });

    const pretty: string[] = [];
    const logger = createServeLogger('pretty', {
      level: 'warn',
      destination: { write: (line) => pretty.push(line) },
    })?.logger;
    logger?.info('not at warn');
    logger?.warn({ run_id: 'r2' }, 'run ended');
    expect(pretty).toHaveLength(1);
    expect(pretty[0]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] WARN: run ended\n {4}run_id: "r2"\n$/);
    expect(createServeLogger('none')).toBeUndefined();
  });
});
