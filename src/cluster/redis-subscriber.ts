/**
 * Subscribing a pub/sub connection safely (docs/architecture.md, "Cluster on Redis").
 *
 * @module
 * @internal
 */
import type { Redis } from 'ioredis';

/**
 * @internal Subscribes `connection` to `channel`, never in the middle of its handshake.
 *
 * ioredis writes a SUBSCRIBE at once while the connection is in status `connect` (TCP up,
 * handshake not done), since Redis accepts SUBSCRIBE while it loads. The handshake's next
 * command, the ready check's INFO, is then refused on a connection already in subscriber mode:
 * ioredis drops the connection and rejects what was pending with "Connection in subscriber
 * mode, only subscriber commands may be used" (ioredis issue #2037, 5.8.2 and later). In every
 * other status a SUBSCRIBE is either written to a ready connection or queued until the
 * handshake is done, so only `connect` waits here: for `ready`, or for `close` (then it queues
 * for the reconnect like any command).
 *
 * @throws whatever `connection.subscribe` rejects with (the connection's own errors)
 */
export async function subscribeAfterHandshake(connection: Redis, channel: string): Promise<void> {
  if (connection.status === 'connect') await handshakeOf(connection);
  await connection.subscribe(channel);
}

/**
 * @internal `subscribeAfterHandshake(connection(), channel)`, made once and shared while it is
 * pending or done; a failed one (ioredis gives up after `maxRetriesPerRequest` while Redis is
 * out of reach) is dropped, so the next call subscribes again instead of failing for good.
 *
 * @returns the subscription's promise, the same one for every call until it fails
 */
export function sharedSubscription(connection: () => Redis, channel: string): () => Promise<void> {
  let subscribing: Promise<void> | undefined;
  return () => {
    if (subscribing !== undefined) return subscribing;
    const attempt = subscribeAfterHandshake(connection(), channel);
    subscribing = attempt;
    attempt.catch(() => {
      if (subscribing === attempt) subscribing = undefined;
    });
    return attempt;
  };
}

/**
 * The end of each connection's handshake in progress, shared by every subscribe waiting for it:
 * one `ready` and one `close` listener per connection, however many sessions are followed
 * meanwhile (a listener pair each went past Node's 10-listener warning at 10 sessions).
 */
const handshakes = new WeakMap<Redis, Promise<void>>();

function handshakeOf(connection: Redis): Promise<void> {
  let handshake = handshakes.get(connection);
  if (handshake === undefined) {
    handshake = new Promise<void>((resolve) => {
      const done = () => {
        connection.off('ready', done);
        connection.off('close', done);
        handshakes.delete(connection);
        resolve();
      };
      connection.on('ready', done);
      connection.on('close', done);
    });
    handshakes.set(connection, handshake);
  }
  return handshake;
}
