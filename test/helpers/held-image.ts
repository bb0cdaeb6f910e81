/** An image server whose answers wait until `release()`: jobs that fetch from it stay in place. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface HeldImageServer {
  /** The image's URL (127.0.0.1: servers need --allow-private-network). */
  url: string;
  /** Answers every request so far and from now on. */
  release(): void;
  /** Requests received so far. */
  requests(): number;
}

export async function startHeldImageServer(t: Tap.Test, image: Buffer, contentType = 'image/jpeg'): Promise<HeldImageServer> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let requests = 0;
  const server = http.createServer((_req, res) => {
    requests++;
    void released.then(() => {
      res.writeHead(200, { 'Content-Type': contentType, 'Content-Length': String(image.length) });
      res.end(image);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    release();
    server.closeAllConnections();
    server.close();
  });
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/photo.jpg`, release, requests: () => requests };
}
