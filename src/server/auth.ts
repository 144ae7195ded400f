/**
 * Bearer-token authentication: a token names its owner (`ownerId`); the owner is never taken
 * from a request body (docs/architecture.md, "Use and vocabulary", §11).
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { nanoid } from 'nanoid';
import { InvalidArgumentError } from '../errors.js';

/** Maps a presented token to its owner, or `undefined` for an unknown token. */
export type Authenticate = (token: string) => string | undefined;

const digest = (token: string) => createHash('sha256').update(token).digest('hex');
const tokenPattern = /^[\x21-\x39\x3b-\x7e]{8,256}$/;

/**
 * Parses a token list in the `RUNPLANE_TOKENS` format: `token:owner,token:owner,...`.
 *
 * @remarks A token is 8–256 visible ASCII characters without `:`; the owner is what follows
 * the first `:` (non-empty, at most 256 characters). Spaces around entries are ignored. Two
 * entries with one token are an error, even for the same owner.
 *
 * @param spec - the list
 * @returns a map of token to owner
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`, field `tokens`) for an empty list
 *   or a bad entry (named by position, never by its secret)
 * @example
 * ```ts
 * parseTokenList('s3cret-alice:alice,s3cret-bob:bob'); // Map { 's3cret-alice' => 'alice', ... }
 * ```
 */
export function parseTokenList(spec: string): Map<string, string> {
  const tokens = new Map<string, string>();
  const entries = spec
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  if (entries.length === 0) {
    throw new InvalidArgumentError(
      'tokens',
      'expected `tokens` to be a list of token:owner entries, got an empty list',
    );
  }
  entries.forEach((entry, index) => {
    const colon = entry.indexOf(':');
    const token = colon < 0 ? entry : entry.slice(0, colon);
    const owner = colon < 0 ? '' : entry.slice(colon + 1).trim();
    if (!tokenPattern.test(token)) {
      throw new InvalidArgumentError(
        'tokens',
        `expected \`tokens\` entry ${index + 1} to start with a token of 8-256 visible ASCII characters without ":"`,
      );
    }
    if (owner === '' || owner.length > 256) {
      throw new InvalidArgumentError(
        'tokens',
        `expected \`tokens\` entry ${index + 1} to be token:owner with an owner of 1-256 characters`,
      );
    }
    if (tokens.has(token)) {
      throw new InvalidArgumentError(
        'tokens',
        `expected \`tokens\` to list each token once, got entry ${index + 1} repeating one`,
      );
    }
    tokens.set(token, owner);
  });
  return tokens;
}

/**
 * Creates an {@link Authenticate} function over a token map.
 *
 * @remarks Tokens are kept as SHA-256 digests and looked up by digest, so the lookup does not
 * compare secrets character by character.
 *
 * @param tokens - token → owner (e.g. from {@link parseTokenList})
 * @returns the authenticate function
 */
export function createTokenAuthenticator(tokens: ReadonlyMap<string, string>): Authenticate {
  const byDigest = new Map<string, string>();
  for (const [token, owner] of tokens) byDigest.set(digest(token), owner);
  return (token) => (token === '' ? undefined : byDigest.get(digest(token)));
}

/** A fresh development token (`rp_dev_` and 32 random characters). */
export function createDevToken(): string {
  return `rp_dev_${nanoid(32)}`;
}

/**
 * Reads the token of an `Authorization: Bearer <token>` header.
 *
 * @param header - the header value, if any
 * @returns the token, or `undefined` when the header is missing or not a Bearer credential
 */
export function bearerToken(header: string | undefined | null): string | undefined {
  if (header === undefined || header === null) return undefined;
  const match = /^Bearer[ ]+([^\s]+)[ ]*$/i.exec(header);
  return match?.[1];
}
