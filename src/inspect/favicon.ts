/**
 * The pages' icon, inline: a `data:` URL in a `<link rel="icon">`, so a browser never asks the
 * service for `/favicon.ico` (which would be a 404 on every load).
 *
 * @module
 */

/** @internal The icon as SVG markup, 32 × 32 (the chat page's header shows it too). */
export const runplaneIconSvg =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">' +
  '<rect width="32" height="32" rx="7" fill="#1a66c9"/>' +
  '<rect x="6" y="8" width="14" height="4" rx="2" fill="#fff"/>' +
  '<rect x="10" y="14" width="16" height="4" rx="2" fill="#9fd3ae"/>' +
  '<rect x="6" y="20" width="9" height="4" rx="2" fill="#f0b429"/>' +
  '</svg>';

/** @internal The `<link rel="icon">` element both pages put in their `<head>`. */
export const faviconLink = `<link rel="icon" type="image/svg+xml" href="data:image/svg+xml,${encodeURIComponent(runplaneIconSvg)}">`;
