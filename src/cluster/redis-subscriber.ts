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
  if (connection.status === 'connect') {
    await new Promise<void>((resolve) => {
      const done = () => {
        connection.off('ready', done);
        connection.off('close', done);
        resolve();
      };
      connection.on('ready', done);
      connection.on('close', done);
    });
  }
  await connection.subscribe(channel);
}
