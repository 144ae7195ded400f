/**
 * A `runplane serve` whose stdout nobody reads (README "Observability"): its log lines go
 * through a bounded asynchronous buffer, so requests keep being answered while lines are
 * dropped and counted in `runplane_log_lines_dropped_total`. The pipe is real: the child's
 * stdout, whose reader (this test) pauses; every wait is for a response or a line.
 */
import { join } from 'node:path';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { describe, expect, it } from 'vitest';
import { useServerProcesses } from '../server/process-helpers.js';

const { boot, scratch } = useServerProcesses('stalled-stdout-token');

describe('a stalled stdout reader', () => {
  it('costs dropped log lines, counted, never a server that stops answering', async () => {
    const server = await boot(join(scratch('runplane-stalled-'), 'runplane.db'), [
      '--metrics-port',
      '0',
    ]);
    const metricsUrl = /metrics: (http:\/\/\S+)/.exec(server.output())?.[1] ?? '';
    expect(metricsUrl).toMatch(/\/metrics$/);
    // The reader stops: the pipe fills (its kernel buffer and what Node reads ahead), then the
    // server's own buffer (1 MiB), then lines are dropped.
    server.child.stdout?.pause();
    // Each request's line carries its path: about 15 kB a line, 3 MB in all.
    const long = `/${'x'.repeat(15_000)}`;
    for (let i = 0; i < 200; i++) {
      const answer = await fetch(`${server.url}${long}`);
      expect(answer.status).toBe(404);
      await answer.body?.cancel();
    }
    const text = await (await fetch(metricsUrl)).text();
    const family = parsePrometheusTextFormat(text).find(
      (metric) => metric.name === 'runplane_log_lines_dropped_total',
    );
    const dropped = Number(family?.metrics[0]?.value);
    expect(dropped).toBeGreaterThan(50);
    expect(dropped).toBeLessThan(200);

    // Read again: the buffered lines arrive, and the server stops cleanly.
    server.child.stdout?.resume();
    server.child.kill('SIGTERM');
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.output()).toContain('runplane serve: stopped (drained)');
  });
});
