/**
 * A real HTTP server on 127.0.0.1 for the OpenAI chat-completions wire format (the tests' fake
 * LLM): it reads each request's JSON body and hands it to the test's handler, and the frames
 * below write its streamed answer.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Answers one request, its body parsed. */
export type WireHandler = (
  res: ServerResponse,
  body: Record<string, unknown>,
  req: IncomingMessage,
) => void;

/** Listens on a free port of 127.0.0.1: the base URL to give the client, and its close. */
export async function startWireServer(handle: WireHandler) {
  const server = createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (part: string) => (raw += part));
    req.on('end', () => handle(res, JSON.parse(raw) as Record<string, unknown>, req));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** One `chat.completion.chunk` frame of `choices` (`extra`: more top-level fields). */
export const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
  `data: ${JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion.chunk',
    created: 1_700_000_000,
    model: 'test-model',
    choices,
    ...extra,
  })}\n\n`;

/** A frame of one choice's delta `d`, with its finish reason when it has one. */
export const delta = (d: Record<string, unknown>, finish: string | null = null) =>
  chunk([{ index: 0, delta: d, finish_reason: finish }]);

/** The stream's last frame. */
export const done = 'data: [DONE]\n\n';
