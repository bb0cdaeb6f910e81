/**
 * Every number of api-spec section 8 and every other bound cutout enforces, in one place.
 * Change a limit here and the CLI, the HTTP reader, sharp and the store all follow.
 */
/**
 * A megabyte as the spec counts it: 10^6 bytes, as its megapixels are 10^6 pixels (so a 25.5 MB
 * upload is over "25 MB" whichever way a client counts).
 */
export const MB = 1_000_000;

/** A byte count in the unit of the limits, for messages: "25 MB", "26.3 MB". */
export function formatMB(bytes: number): string {
  return `${Number((bytes / MB).toFixed(1))} MB`;
}

/** A byte count for messages at any size: "25 MB", "0.5 MB", "20 kB", "800 bytes". */
export function formatSize(bytes: number): string {
  if (bytes >= MB / 10) return formatMB(bytes);
  return bytes >= 1000 ? `${Number((bytes / 1000).toFixed(1))} kB` : `${bytes} bytes`;
}

/**
 * `value / scale` with one decimal, or as many more as it takes (up to 6) to show it above
 * `limit / scale`: 25,000,001 bytes is "25.000001", never "25" beside a limit of 25. Truncated,
 * not rounded, so it never shows more than the real size.
 */
export function shownAbove(value: number, limit: number, scale: number): string {
  let shown = 0;
  for (let decimals = 1; decimals <= 6; decimals++) {
    const unit = 10 ** decimals;
    shown = Math.floor((value / scale) * unit + 1e-6) / unit; // the 1e-6 absorbs float noise (25.000001 * 1e6)
    if (shown > limit / scale) break;
  }
  return String(shown);
}

/** "Input is 26.3 MB; the limit is 25 MB", for any size over the limit. */
export function inputTooLargeMessage(bytes: number): string {
  return `Input is ${shownAbove(bytes, LIMITS.maxInputBytes, MB)} MB; the limit is ${formatMB(LIMITS.maxInputBytes)}`;
}

export const LIMITS = Object.freeze({
  /** Upload / input size in bytes (25 MB). */
  maxInputBytes: 25 * MB,
  /** Image area in pixels (50 megapixels), checked from the header before decoding. */
  maxInputPixels: 50_000_000,
  /**
   * An animation cut out frame by frame: at most this many frames, and this many pixels in all
   * (frames x width x height of the input), checked from the header before any frame is decoded.
   * The budget bounds the decoded frames held at once (4 bytes a pixel, in and out: about 0.5 GB).
   */
  maxAnimationFrames: 500,
  maxAnimationPixels: 60_000_000,
  /** `/remove` answers an animation up to this many frames x pixels synchronously (about 25 frames of 512x512); larger ones go through `/jobs`. */
  maxSyncAnimationPixels: 6_600_000,
  /** Sync `/remove` at `size=full` (4 MP). */
  maxSyncFullPixels: 4_000_000,
  /** `auto` is `full` up to this area, else `preview`. */
  autoFullMaxPixels: 4_000_000,
  /** Longest side of a preview. */
  previewMaxSide: 800,
  /** `crop_margin`, per side: at most this many pixels, or this share of the subject's size (remove.bg's bounds). */
  cropMarginMaxPx: 500,
  cropMarginMaxPercent: 50,
  /** remove.bg's dialect: a preview's area (0.25 MP, e.g. 625x400), and `full`/`auto`'s (25 MP). */
  removebgPreviewPixels: 250_000,
  removebgFullPixels: 25_000_000,
  /**
   * remove.bg's dialect answers every size synchronously (up to 50 MP) through the job pool: its
   * hard timeout, longer than the native sync route's 4 MP one. Nothing is charged past it.
   */
  removebgTimeoutMs: 180_000,
  /** `scale`: the smallest share of the canvas a subject may be scaled to (remove.bg's 10 %). */
  scaleMinPercent: 10,
  /** Sync hard timeout in ms. */
  syncTimeoutMs: 30_000,
  /** Images per batch request. */
  maxBatchImages: 50,
  /** Idempotency window in seconds (24 h). */
  idempotencyTtlSeconds: 24 * 3600,
  /** Result retention in seconds (24 h). */
  resultTtlSeconds: 24 * 3600,
  /** Usage history in days. */
  usageDays: 30,
  /** Callback retries after the first try. */
  callbackRetries: 3,
  /** Requests per minute per key. */
  rateLimitPerMinute: 60,
  /** Free credits for a new account. */
  freeCredits: 10,
  /** JSON body cap: a base64 image of 25 MB is 33.4 MB, plus the other fields. */
  maxJsonBytes: Math.ceil((25 * MB * 4) / 3) + 64 * 1024,
  /** Redirects followed for an `image_url`. */
  maxRedirects: 3,
  /** Time allowed to fetch an `image_url` in ms. */
  fetchTimeoutMs: 15_000,
  /** Longest caller `X-Request-Id` kept as the request's id (longer ones are replaced). */
  maxRequestIdLength: 128,
  /** PostgreSQL connections per server process (100 servers x 10 fits a max_connections of 1000+). */
  postgresPoolSize: 10,
  /**
   * Time allowed to open a PostgreSQL connection, and to wait for a free one of the pool, in ms.
   * With the query timeout it bounds how long a request waits for a store that stopped answering:
   * 5 s + 8 s, under the 15 s within which such a call must fail (cli-contract, `cutout serve`).
   */
  postgresConnectTimeoutMs: 5_000,
  /**
   * One statement, timed by node-postgres from when it is sent (`query_timeout`): past it the
   * connection is dropped (PostgreSQL rolls its transaction back) and the caller gets a 503. The
   * one bound that holds when the database, or the network path to it, is silent.
   */
  postgresQueryTimeoutMs: 8_000,
  /**
   * The same bound kept by PostgreSQL itself (`statement_timeout`), a little shorter, so a slow but
   * live database cancels the statement and the connection stays usable. Migrations run without it.
   */
  postgresStatementTimeoutMs: 7_000,
  /** TCP keepalive on every PostgreSQL connection: the first probe after this much silence (ms). */
  postgresKeepAliveDelayMs: 10_000,
  /** How long a lost LISTEN connection waits before it connects again (new jobs are still found by the sweep). */
  postgresListenRetryMs: 1000,
  /**
   * How often the LISTEN connection (idle by nature, so nothing else would notice) is checked with
   * a trivial query, and how long that query may take before the connection is replaced. A peer
   * that is gone without a word (a frozen or partitioned database) is noticed within both.
   */
  postgresListenCheckMs: 10_000,
  postgresListenCheckTimeoutMs: 3_000,
  /** `GET /readyz`: the store must answer a trivial query within this (cli-contract). */
  readyStoreTimeoutMs: 2_000,
  /** Health never waits on the store longer than this for its queue counts (then this server's own view stands in). */
  healthStoreTimeoutMs: 500,
  /** Retry-After of a 503 when the store did not answer in time. */
  storeRetryAfterSeconds: 5,
  /**
   * The object store of `--results s3://...` (src/store/results-s3.ts). Opening a connection, and
   * a socket that stays silent mid-call, are bounded by the first two; every call as a whole
   * (retries included; for a read, until its first byte) by the third, so nothing hangs.
   */
  objectStoreConnectTimeoutMs: 3_000,
  objectStoreIdleTimeoutMs: 15_000,
  objectStoreCallTimeoutMs: 30_000,
  /** Retry-After of a 503 when the object store could not be reached. */
  objectStoreRetryAfterSeconds: 5,
  /** Expired results deleted per round of the sweeper: S3's DeleteObjects takes at most 1,000 keys. */
  resultPurgeBatch: 1000,
  /** The longest a presigned URL may live: SigV4's cap (7 days). */
  presignMaxSeconds: 604_800,
  /** A result kept in PostgreSQL is read in slices of this size, never whole. */
  postgresResultSliceBytes: 1024 * 1024,
  /**
   * `Retry-After` on a queued or processing job's record: when to poll again (as Azure's and
   * Google's long-running operations say it). Polls count against the rate limit; at this pace one
   * job polled costs 30 of its 60 requests a minute. A callback URL costs none.
   */
  jobPollSeconds: 2,
  /** Default `--lease-ms`: how long a claimed job stays with a silent server. */
  jobLeaseMs: 30_000,
  /**
   * Shortest `--lease-ms`: leases and heartbeats are renewed every third of it, and a renewal is
   * one round trip to the store; under a second, one slow query hands a running job to another server.
   */
  minJobLeaseMs: 1_000,
  /** Longest `--lease-ms` (an hour: a dead server's jobs wait that long). */
  maxJobLeaseMs: 3_600_000,
  /** Runs of a job (the first and the retries after its server died or was stopped) before it fails. */
  jobMaxAttempts: 3,
  /** A `servers` row silent this long past its lease is deleted (the row of a server that died). */
  serverRowRetentionMs: 3_600_000,
  /** One callback attempt: connect, send, read the status. A graceful stop waits this long for attempts in flight. */
  callbackAttemptTimeoutMs: 10_000,
  /** Past an attempt's timeout, how long a stop waits for its outcome to be written to the store. */
  callbackRecordMarginMs: 2_000,
  /** How long a claimed callback attempt stays with its server (longer than one attempt's timeout). */
  callbackLeaseMs: 60_000,
  /**
   * Open Inference Protocol bodies (model server requests, upstream responses) are bounded by the
   * tensor they must carry, never by one fixed size: see `inferBodyLimit`. The JSON header beside
   * the tensor data (names, shape, parameters, an id) gets this much.
   */
  inferHeaderAllowanceBytes: 64 * 1024,
  /**
   * Bytes one FP32 element may take as JSON text. The longest a float32 widened to a double prints
   * as is 24 characters ("-1.1754943508222875e-38"), with its comma 25; the brackets of a nested
   * array add under one byte per row. Typical mattes and inputs average 8 to 20.
   */
  inferJsonBytesPerElement: 25,
  /**
   * Inference slots of a model server: requests whose body has been read in full and that are
   * being decoded, waiting for the worker thread or running (one runs at a time; the others are
   * decoded and ready). A request takes a slot only once its whole body is in: a client that
   * sends half a body and stalls holds no slot. Each slot holds a body and its tensor (12.6 MB +
   * 12.6 MB binary at 1024 px, up to 79 MB of JSON and its parse).
   */
  modelServerMaxInferences: 4,
  /**
   * Requests read in full that wait for a slot, first come first served (Triton's
   * `max_queue_size`). Past it: 503 with Retry-After. Sized for a few `serve --upstream` with
   * their default workers (8 on a 16-core machine) sharing one model server.
   */
  modelServerMaxQueue: 32,
  /** Retry-After (s) of the model server's 503 when its queue or its body budget is full. */
  modelServerRetryAfterSeconds: 1,
  /**
   * Bytes of request bodies a model server holds at once (being read, queued, in a slot): past it
   * the request whose chunk would go over gets 503 with Retry-After. 40 binary bodies at 1024 px,
   * or about 8 JSON ones; bounds the memory whatever the number of connections.
   */
  modelServerBodyBudgetBytes: 512 * MB,
  /** Time a model server allows a client to send its request headers (node's `headersTimeout`). */
  modelServerHeadersTimeoutMs: 10_000,
  /**
   * Time from a request's headers to the last byte of its body: past it, 408 and the connection
   * is closed (12.6 MB of binary tensor takes 10 s at 10 Mbit/s). Node's own `requestTimeout` is
   * set a little longer as a backstop; its checks run every `modelServerTimeoutCheckMs`.
   */
  modelServerBodyTimeoutMs: 30_000,
  modelServerTimeoutCheckMs: 1_000,
  /** Longest request `id` a model server echoes (the protocol's id is the client's correlation string). */
  modelServerMaxIdLength: 256,
  /**
   * One model call to an upstream, its retries of busy answers included (a sync request is also
   * bounded by its own deadline).
   */
  upstreamTimeoutMs: 60_000,
  /**
   * Retries of a busy upstream (503 with Retry-After, Triton's "exceeds maximum queue size", 429,
   * 408): the first wait without a Retry-After, doubling per retry up to the max, with full
   * jitter; a Retry-After is honoured up to the max, plus up to half of it again as jitter. The
   * retries stop at the call's deadline, when the call counts as timed out (an outage).
   */
  upstreamBusyFirstDelayMs: 200,
  upstreamBusyMaxDelayMs: 5_000,
  /** Largest answer read from an upstream's /v2, metadata and health endpoints. */
  upstreamMaxMetadataBytes: 1 * MB,
  /** Reading an upstream's metadata at start. */
  upstreamStartTimeoutMs: 10_000,
  /** Health's probe of the upstream's /v2/health/ready, and how long its answer is reused. */
  upstreamProbeTimeoutMs: 1_000,
  upstreamReadyCacheMs: 2_000,
  /**
   * Retry-After of a 503 gpu_unavailable when this server is shutting down or its sync queue is
   * full: about one inference, by when a slot (or another server of the fleet) is free.
   */
  busyRetryAfterSeconds: 5,
  /**
   * Images from this area up run without onnxruntime's CPU memory arena at fp32 (see `arenaFor`
   * in src/pipeline/model.ts): at 16 MP and more the fp32 arena's retained 0.7 GB beside the
   * image's own buffers went over the 1.5 GB budget. int8's smaller arena stays on.
   */
  arenaMaxSourcePixels: 16_000_000,
  /**
   * At fp32, outputs above this area wait for the model run before their full-size decode, so that
   * the decoded pixels (150 MB at 50 MP) do not sit beside the session's working memory at its
   * peak (see `decodeOverlapMaxPixels` in src/pipeline/process.ts; int8 and upstream runs overlap
   * at every size).
   */
  fp32DecodeOverlapMaxPixels: 16_000_000,
  /** Retry-After of a 503 gpu_unavailable when the upstream is unreachable or failing. */
  upstreamRetryAfterSeconds: 5,
  /** A job put back by an upstream outage waits this long, doubling per outage in a row, up to the max. */
  upstreamOutageFirstDelayMs: 1_000,
  upstreamOutageMaxDelayMs: 15_000,
  /**
   * `cutout remove --watch`: a new or changed file is read once its size has not changed for this
   * long (polled every 100 ms), so a file still being copied in is not read half-way.
   */
  watchSettleMs: 1_000,
});

/**
 * The largest Open Inference Protocol body that can carry a tensor of `elements` FP32 values:
 * binary (Triton's extension) is 4 bytes an element; JSON is `inferJsonBytesPerElement`. A body
 * past it cannot be a valid request or answer, so it is refused before it is read or parsed.
 */
export function inferBodyLimit(elements: number, encoding: 'binary' | 'json'): number {
  const perElement = encoding === 'binary' ? 4 : LIMITS.inferJsonBytesPerElement;
  return elements * perElement + LIMITS.inferHeaderAllowanceBytes;
}
