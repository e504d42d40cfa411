/**
 * Test support: a loopback TCP proxy in front of one server, to cut a client off from it the
 * way a network partition does. `pause()` stops carrying bytes both ways while every socket
 * stays open (the client sees silence, not a closed connection); `resume()` carries on.
 */
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';

/** A running proxy. */
export interface TcpProxy {
  /** The proxy's port on 127.0.0.1. */
  readonly port: number;
  /** Stops carrying bytes (both directions); sockets stay open. */
  pause(): void;
  /** Carries bytes again, including what queued meanwhile. */
  resume(): void;
  close(): Promise<void>;
}

/** Starts a proxy on a free loopback port that forwards to 127.0.0.1:`targetPort`. */
export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  const pairs = new Set<[Socket, Socket]>();
  /** Bytes held back while paused, per destination socket. */
  const held = new Map<Socket, Buffer[]>();
  let paused = false;
  const forward = (from: Socket, to: Socket): void => {
    from.on('data', (chunk: Buffer) => {
      if (!paused) to.write(chunk);
      else held.set(to, [...(held.get(to) ?? []), chunk]);
    });
  };
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1');
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    forward(client, upstream);
    forward(upstream, client);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    pause() {
      paused = true;
    },
    resume() {
      paused = false;
      for (const [to, chunks] of held) if (!to.destroyed) for (const c of chunks) to.write(c);
      held.clear();
    },
    async close() {
      for (const [a, b] of pairs) {
        a.destroy();
        b.destroy();
      }
      await new Promise((r) => server.close(r));
    },
  };
}
