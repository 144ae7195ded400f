/**
 * An in-test TCP proxy between one runplane instance and Redis, to cut that instance off the
 * way a network does (docs/architecture.md, "Cluster on Redis"): `blackhole()` keeps the
 * connections open and forwards nothing either way (a partition: the client learns only by its
 * own timeouts), `reset()` destroys them and refuses new ones (a crashed peer or a firewall
 * answering RST), and `heal()` forwards again. Nothing here waits on the wall clock.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

/** A running proxy to `127.0.0.1:<targetPort>`. */
export interface TcpProxy {
  /** The port clients connect to instead of the target's. */
  readonly port: number;
  /** Connections accepted so far (each is a pair of sockets). */
  readonly accepted: () => number;
  /** Forwards nothing any more, on open and new connections, and closes none. */
  blackhole(): void;
  /** Destroys every open connection and refuses new ones until {@link TcpProxy.heal}. */
  reset(): void;
  /** Forwards again: held data flows on, new connections are served. */
  heal(): void;
  /** Closes the listener and every connection. */
  close(): Promise<void>;
}

type Mode = 'open' | 'blackhole' | 'reset';

interface Pair {
  readonly client: Socket;
  readonly upstream: Socket;
  /** What arrived while black-holed, in arrival order. */
  readonly held: Array<{ readonly to: Socket; readonly chunk: Buffer }>;
}

/**
 * Starts a proxy on a free loopback port.
 *
 * @param targetPort - the port on 127.0.0.1 to forward to (a private `redis-server`)
 * @returns the proxy once it listens
 */
export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let mode: Mode = 'open';
  let accepted = 0;
  const pairs = new Set<Pair>();

  const server: Server = createServer((client) => {
    if (mode === 'reset') {
      client.destroy();
      return;
    }
    accepted += 1;
    const upstream = connect(targetPort, '127.0.0.1');
    const pair: Pair = { client, upstream, held: [] };
    pairs.add(pair);
    // Forwarded by hand, not piped: a pipe resumes its source on drain, which would let data
    // through a black hole. While black-holed, what arrives is held, in order, and flows on at
    // heal, as a partition that heals delivers late.
    const forward = (to: Socket) => (chunk: Buffer) => {
      if (mode === 'open') to.write(chunk);
      else pair.held.push({ to, chunk });
    };
    client.on('data', forward(upstream));
    upstream.on('data', forward(client));
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the proxy has no port');

  return {
    port: address.port,
    accepted: () => accepted,
    blackhole() {
      mode = 'blackhole';
    },
    reset() {
      mode = 'reset';
      for (const pair of [...pairs]) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      pairs.clear();
    },
    heal() {
      mode = 'open';
      for (const pair of pairs) {
        for (const { to, chunk } of pair.held.splice(0)) to.write(chunk);
      }
    },
    close() {
      for (const pair of [...pairs]) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      pairs.clear();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
