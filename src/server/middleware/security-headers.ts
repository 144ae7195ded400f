/**
 * Security headers on every answer (Hono's `secureHeaders`), and the Content-Security-Policy of
 * the two pages, built from hashes of their inline script and style (docs/architecture.md,
 * "HTTP service").
 *
 * @remarks Every answer gets `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`,
 * `X-Frame-Options: DENY` and, unless a page set its own, the API's policy `default-src 'none';
 * frame-ancestors 'none'` (a JSON answer loads nothing). A page's policy allows exactly its
 * own inline `<script>` and `<style>` elements by their SHA-256 hashes, so no injected script
 * or style can run even if one got into the document: no `'unsafe-inline'`, no nonce to leak.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { secureHeaders } from 'hono/secure-headers';

/**
 * The headers middleware of the whole service; a handler's own `Content-Security-Policy`
 * (a page's, from {@link pageSecurityPolicy}) is kept.
 *
 * @returns the middleware
 */
export function securityHeaders(): MiddlewareHandler {
  return secureHeaders({
    contentSecurityPolicy: {
      defaultSrc: ["'none'"],
      frameAncestors: ["'none'"],
    },
    referrerPolicy: 'no-referrer',
    xFrameOptions: 'DENY',
    // Served over plain HTTP on a chosen port: HSTS belongs to the TLS proxy in front.
    strictTransportSecurity: false,
    overwrite: false,
  });
}

/** `'sha256-…'` of a text, as CSP writes a hash source. */
const hashSource = (text: string) =>
  `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

/**
 * The Content-Security-Policy of a self-contained page: its inline scripts and styles by hash,
 * images from itself or `data:` (the favicon), fetches and event streams to itself only.
 *
 * @param html - the page, exactly as served (a data block such as
 *   `<script type="application/x-ndjson">` is not executed and needs no hash)
 * @returns the header's value
 */
export function pageSecurityPolicy(html: string): string {
  const scripts = [...html.matchAll(/<script(?![^>]*\bsrc=)([^>]*)>([\s\S]*?)<\/script>/g)]
    .filter(
      ([, attributes]) =>
        !/\btype="(?!(?:text|application)\/javascript|module")/.test(attributes ?? ''),
    )
    .map(([, , body]) => hashSource(body ?? ''));
  const styles = [...html.matchAll(/<style[^>]*>([\s\S]*?)<\/style>/g)].map(([, body]) =>
    hashSource(body ?? ''),
  );
  return [
    "default-src 'none'",
    `script-src ${scripts.join(' ') || "'none'"}`,
    `style-src ${styles.join(' ') || "'none'"}`,
    "img-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}
