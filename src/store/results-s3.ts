/**
 * Result bytes in an S3-compatible object store, `--results s3://BUCKET[/PREFIX]` (the seam:
 * results-bytes.ts), through the AWS SDK for JavaScript v3 and its standard configuration chain:
 * AWS_REGION, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile or an instance role, and
 * AWS_ENDPOINT_URL_S3/AWS_ENDPOINT_URL for MinIO, R2, Ceph; `pathStyle` for stores that need
 * path-style addressing. The results row holds only the object's key.
 *
 * - A result is one PutObject of bytes already in memory: S3 makes an object visible only once
 *   its upload completed, so an upload cut half-way leaves nothing a read could return; for
 *   stores less strict, a failed upload's key is deleted again, and in any case no results row
 *   points to it (the row is written only after the upload succeeded). (Results
 *   are at most tens of MB, under the 5 GB of a single PUT; a multipart upload would add calls
 *   and a cleanup of incomplete uploads without making anything safer.)
 * - Reads stream the object's body as it arrives; presigned URLs are SigV4 query signatures.
 * - Every call is bounded: connecting and a silent socket by the request handler's timeouts, the
 *   call as a whole (its retries included; for a read, until the first byte) by an abort signal.
 *   A store that cannot be reached surfaces as ResultsUnavailable (503 with Retry-After; a job
 *   goes back to the queue), never as a hang.
 */
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { LIMITS } from '../limits.js';
import { ResultsUnavailable, type ResultPlacement } from './results-bytes.js';

export interface S3Location { bucket: string; prefix: string }

/** `s3://bucket[/prefix]` -> bucket and a prefix ending in `/` (or empty); null when not such a URL. */
export function parseS3Url(url: string): S3Location | null {
  const m = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/i.exec(url.trim());
  if (!m) return null;
  const prefix = (m[2] ?? '').replace(/^\/+|\/+$/g, '');
  return { bucket: m[1], prefix: prefix === '' ? '' : `${prefix}/` };
}

export interface S3ResultsOptions {
  /** Path-style addressing (`http://host/bucket/key`): MinIO and most self-hosted stores. */
  pathStyle?: boolean;
}

/** The key the readiness probe reads, written once at start. */
const PROBE_NAME = '.cutout-probe';

/** Whether an SDK error says the object is not there (as opposed to the store being unreachable). */
function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } } | null;
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
}

/** An error in one line, for the operator (never the credentials: the SDK does not put them there). */
export function s3Reason(err: unknown): string {
  const e = err as { name?: string; message?: string; code?: string; $metadata?: { httpStatusCode?: number } } | null;
  if (e?.name === 'AbortError' || e?.name === 'TimeoutError') return `no answer within ${LIMITS.objectStoreCallTimeoutMs} ms`;
  const status = e?.$metadata?.httpStatusCode;
  const message = String(e?.message ?? err).split('\n')[0];
  return `${e?.code ?? e?.name ?? 'Error'}${status ? ` (HTTP ${status})` : ''}: ${message}`;
}

/**
 * Runs one call under the call timeout. The timer stops once the call resolved: a GetObject's
 * body then streams for as long as it needs, its silence bounded by the idle timeout.
 */
async function bounded<T>(fn: (abortSignal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), LIMITS.objectStoreCallTimeoutMs);
  timer.unref();
  try {
    return await fn(controller.signal);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A read's body, bounded by the idle timeout only while it is wanted: the request handler's socket
 * timeout would also cut a body that waits for a slow client (backpressure pauses it, and a
 * paused socket is silent), so it is replaced by a check that counts silence only while the body
 * flows. A store that stops sending mid-object still ends the read within the idle timeout.
 */
function idleBounded(body: Readable): Readable {
  const socket = (body as Readable & { socket?: Socket }).socket;
  if (!socket) return body;
  socket.setTimeout(0);
  let seen = socket.bytesRead;
  let quietSince = Date.now();
  const check = setInterval(() => {
    if (body.isPaused() || socket.bytesRead !== seen) {
      seen = socket.bytesRead;
      quietSince = Date.now();
    } else if (Date.now() - quietSince > LIMITS.objectStoreIdleTimeoutMs) {
      body.destroy(new Error(`the object store sent nothing for ${LIMITS.objectStoreIdleTimeoutMs} ms`));
    }
  }, 1000);
  check.unref();
  body.once('close', () => clearInterval(check));
  return body;
}

/**
 * Opens the object store: builds the client (the SDK loads only here: a server without
 * `--results` never pays for it) and writes the readiness probe object, so a wrong bucket, wrong
 * credentials or an unreachable endpoint fail the start in one line.
 */
export async function openS3Results(url: string, options: S3ResultsOptions = {}): Promise<ResultPlacement> {
  const where = parseS3Url(url);
  if (!where) throw new Error(`Unsupported results location ${url}: expected s3://BUCKET[/PREFIX]`);
  const sdk = await import('@aws-sdk/client-s3');
  const { getSignedUrl } = await import('@aws-sdk/s3-request-presigner');
  const { bucket, prefix } = where;
  const description = `s3://${bucket}/${prefix}`;
  const client: S3Client = new sdk.S3Client({
    forcePathStyle: options.pathStyle === true,
    requestHandler: { connectionTimeout: LIMITS.objectStoreConnectTimeoutMs, socketTimeout: LIMITS.objectStoreIdleTimeoutMs },
  });
  const probeKey = `${prefix}${PROBE_NAME}`;
  try {
    await bounded((abortSignal) => client.send(new sdk.PutObjectCommand({ Bucket: bucket, Key: probeKey, Body: 'ok', ContentType: 'text/plain' }), { abortSignal }));
  } catch (err) {
    client.destroy();
    throw new Error(`Cannot use the object store ${description}: ${s3Reason(err)}`);
  }

  return {
    kind: 's3',
    description,
    async put(name, ext, data, contentType) {
      const key = `${prefix}${name}.${ext}`;
      try {
        await bounded((abortSignal) => client.send(new sdk.PutObjectCommand({ Bucket: bucket, Key: key, Body: data, ContentType: contentType, ContentLength: data.length }), { abortSignal }));
      } catch (err) {
        // S3 never shows an object whose upload failed, but not every S3-compatible store is as
        // strict (s3rver keeps what arrived): the key is this attempt's own, so deleting it is
        // safe. Best effort: no row ever points to it either way.
        await bounded((abortSignal) => client.send(new sdk.DeleteObjectCommand({ Bucket: bucket, Key: key }), { abortSignal })).catch(() => undefined);
        throw new ResultsUnavailable(err);
      }
      return { location: key, inline: null };
    },
    async open(_q, row) {
      if (!row.location) return null;
      try {
        const out = await bounded((abortSignal) => client.send(new sdk.GetObjectCommand({ Bucket: bucket, Key: row.location! }), { abortSignal }));
        return { body: idleBounded(out.Body as Readable), size: out.ContentLength ?? null };
      } catch (err) {
        if (isNotFound(err)) return null;
        throw new ResultsUnavailable(err);
      }
    },
    async remove(locations) {
      for (let i = 0; i < locations.length; i += LIMITS.resultPurgeBatch) {
        const batch = locations.slice(i, i + LIMITS.resultPurgeBatch);
        // Quiet: only failures are listed. What fails here stays until the bucket's lifecycle rule (docs/fleet.md).
        const out = await bounded((abortSignal) => client.send(new sdk.DeleteObjectsCommand({
          Bucket: bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true },
        }), { abortSignal }));
        if (out.Errors && out.Errors.length > 0) throw new Error(`${out.Errors.length} object(s) not deleted: ${out.Errors[0].Code ?? ''} ${out.Errors[0].Message ?? ''}`.trim());
      }
    },
    async presign(row, expiresInSeconds) {
      // Signing is local (no call): only the credentials are resolved, from the same chain.
      return getSignedUrl(client, new sdk.GetObjectCommand({ Bucket: bucket, Key: row.location! }), { expiresIn: expiresInSeconds });
    },
    async ping() {
      await bounded((abortSignal) => client.send(new sdk.HeadObjectCommand({ Bucket: bucket, Key: probeKey }), { abortSignal }));
    },
    close() {
      client.destroy();
    },
  };
}
