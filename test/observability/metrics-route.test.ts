/**
 * `GET /metrics` in memory (README "Observability"): the bearer scheme is matched as the user
 * tokens' is (case-insensitively), a scrape is never cached, and a metrics token a scraper
 * could not send is refused at start.
 */
import { Counter, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '../../src/errors.js';
import { createMetricsHandler } from '../../src/server/routes/metrics.js';
import { createServeObservability } from '../../src/server/serve-observability.js';

const registry = new Registry();
new Counter({ name: 'probe_total', help: 'a probe', registers: [registry] }).inc();
const handler = createMetricsHandler(registry, 'metrics-secret-1');
const scrape = (authorization: string | undefined, method = 'GET') =>
  handler(
    new Request('http://runplane.test/metrics', {
      method,
      headers: authorization === undefined ? {} : { authorization },
    }),
  );

describe('/metrics route', () => {
  it.each(['Bearer metrics-secret-1', 'bearer metrics-secret-1', 'BEARER  metrics-secret-1 '])(
    'accepts %j',
    async (authorization) => {
      const answer = await scrape(authorization);
      expect(answer.status).toBe(200);
      expect(answer.headers.get('cache-control')).toBe('no-store');
      expect(await answer.text()).toContain('probe_total 1');
    },
  );

  it.each([
    undefined,
    'Bearer metrics-secret-2',
    'Bearer metrics-secret-1x',
    'Bearer metrics secret-1',
    'Basic metrics-secret-1',
    'Bearer',
  ])('refuses %j with 401', async (authorization) => {
    const answer = await scrape(authorization);
    expect(answer.status).toBe(401);
    expect(answer.headers.get('www-authenticate')).toBe('Bearer realm="runplane-metrics"');
  });

  it('HEAD has the headers and no body; OPTIONS is 405 with Allow', async () => {
    const head = await scrape('Bearer metrics-secret-1', 'HEAD');
    expect(head.status).toBe(200);
    expect(head.headers.get('cache-control')).toBe('no-store');
    expect(await head.text()).toBe('');
    const options = await scrape('Bearer metrics-secret-1', 'OPTIONS');
    expect(options.status).toBe(405);
    expect(options.headers.get('allow')).toBe('GET, HEAD');
  });
});

describe('metrics token', () => {
  it.each(['short', 'metrics-secret\n', 'metrics secret', 'métrics-secret', 'x'.repeat(257)])(
    'a token no scraper can send (%j) is refused at start',
    (metricsToken) => {
      let thrown: unknown;
      try {
        createServeObservability({ metricsToken });
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(InvalidArgumentError);
      expect(thrown).toMatchObject({ code: 'INVALID_ARGUMENT', field: 'metricsToken' });
      expect(String(thrown)).toContain('expected `metricsToken` to be 8-256 visible ASCII');
      // The value is a secret: never in the message.
      expect(String(thrown)).not.toContain(metricsToken);
    },
  );

  it('a token of 8-256 visible ASCII characters is taken', () => {
    expect(createServeObservability({ metricsToken: 'metrics:secret-1' }).runMetrics).toBeDefined();
  });
});
