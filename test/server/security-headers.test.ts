/**
 * Security headers: the two pages run under a Content-Security-Policy that allows only their
 * own inline script and style (by hash), and every API answer, errors included, carries
 * `nosniff`, `no-referrer`, no framing and a policy that loads nothing.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createTimelineHub } from '../../src/inspect/timeline-hub.js';
import { pageSecurityPolicy } from '../../src/server/middleware/security-headers.js';
import { createTestService } from './helpers.js';

let t: ReturnType<typeof createTestService> | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

/** The named headers of an answer, as an object. */
const headersOf = (answer: Response, names: readonly string[]) =>
  Object.fromEntries(names.map((name) => [name, answer.headers.get(name)]));

const common = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

describe('security headers', () => {
  it('give each page a policy of its own inline script and style, by hash', async () => {
    t = createTestService({ timeline: createTimelineHub() });
    for (const path of ['/', '/inspect']) {
      const answer = await t.request('GET', path, { token: null });
      expect(answer.status).toBe(200);
      expect(headersOf(answer, Object.keys(common))).toEqual(common);
      const policy = answer.headers.get('content-security-policy') ?? '';
      const directives = new Map(
        policy.split('; ').map((d) => [d.split(' ')[0], d.split(' ').slice(1)] as const),
      );
      expect(directives.get('default-src'), path).toEqual(["'none'"]);
      expect(directives.get('frame-ancestors'), path).toEqual(["'none'"]);
      for (const kind of ['script-src', 'style-src']) {
        const sources = directives.get(kind) ?? [];
        expect(sources.length, `${path} ${kind}`).toBeGreaterThan(0);
        expect(
          sources.every((s) => /^'sha256-[A-Za-z0-9+/]{43}='$/.test(s)),
          path,
        ).toBe(true);
      }
      expect(policy).not.toMatch(/unsafe-inline|unsafe-eval/);
      // The policy is the page's own: the HTML served is what was hashed.
      expect(policy).toBe(pageSecurityPolicy(await answer.text()));
    }
  });

  it('give every API answer, errors included, a policy that loads nothing', async () => {
    t = createTestService();
    for (const [path, token, status] of [
      ['/api/sessions', undefined, 200],
      ['/api/sessions', null, 401],
      ['/api/nothing-here', undefined, 404],
      ['/healthz', null, 200],
    ] as const) {
      const answer = await t.request('GET', path, token === null ? { token: null } : {});
      expect(answer.status, path).toBe(status);
      const expected = {
        ...common,
        'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
      };
      expect(headersOf(answer, Object.keys(expected)), path).toEqual(expected);
    }
  });

  it('hash only what the browser executes: a data block needs no hash', () => {
    const policy = pageSecurityPolicy(
      '<style>a{}</style><script type="application/x-ndjson">{}</script><script>go()</script>',
    );
    expect(policy).toContain(
      "script-src 'sha256-5KYv+PUboo5h+0+YAtGRPbwv5d/QxzHslP4YGnUaxRw='; style-src",
    );
    expect(policy.match(/sha256-/g)).toHaveLength(2);
  });
});
