/** A fixture the session tests share. */
import type { Agent } from '../../src/index.js';

/** An agent that answers its input at once. */
export const echo: Agent<string, string> = { execute: (input) => Promise.resolve(input) };
