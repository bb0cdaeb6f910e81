/**
 * The pure arithmetic of the queue: callback retry delays, what to do after a delivery attempt,
 * and the Retry-After of a full queue. No clock, no I/O: unit-tested on its own.
 */

/**
 * Delay before retry number `retry` (1 for the first retry): `firstDelayMs` doubling each time,
 * so 1 s, 2 s, 4 s for a first delay of 1 s. Capped at `maxMs` (default 1 hour).
 */
export function callbackBackoffMs(retry: number, firstDelayMs: number, maxMs = 3_600_000): number {
  if (!Number.isInteger(retry) || retry < 1) throw new RangeError(`retry must be a positive integer, got ${retry}`);
  if (!(firstDelayMs > 0)) throw new RangeError(`firstDelayMs must be positive, got ${firstDelayMs}`);
  return Math.min(maxMs, firstDelayMs * 2 ** (retry - 1));
}

/** What an attempt came to: a status (any HTTP answer) or a network-level failure. */
export type AttemptOutcome = { status: number } | { networkError: string };

export type DeliveryDecision =
  | { state: 'delivered' }
  | { state: 'retry'; delayMs: number; reason: string }
  | { state: 'gave_up'; reason: string };

/**
 * The delivery rule of api-spec 6: any 2xx ends delivery; a network error or a 5xx is retried
 * `retries` times (default 3, so 4 attempts at most) with exponential backoff; any other status
 * (3xx, 4xx: the receiver answered and refused) ends delivery without retry.
 * `attemptsMade` counts the attempt just made (1 after the first try).
 */
export function deliveryDecision(attemptsMade: number, outcome: AttemptOutcome, opts: { retries: number; firstDelayMs: number }): DeliveryDecision {
  if ('status' in outcome) {
    const { status } = outcome;
    if (status >= 200 && status <= 299) return { state: 'delivered' };
    if (status < 500 || status > 599) return { state: 'gave_up', reason: `HTTP ${status} (not retried: only network errors and 5xx are)` };
  }
  const reason = 'status' in outcome ? `HTTP ${outcome.status}` : outcome.networkError;
  if (attemptsMade > opts.retries) return { state: 'gave_up', reason: `${reason} (after ${attemptsMade} attempts)` };
  return { state: 'retry', delayMs: callbackBackoffMs(attemptsMade, opts.firstDelayMs), reason };
}

/**
 * Seconds a client should wait when the queue is full: the time the workers need to bring the
 * queue down by one worker's share, from the recent mean job time. At least 1 s, at most 5 min.
 */
export function queueRetryAfterSeconds(queued: number, workers: number, meanJobMs: number): number {
  const perWorker = Math.max(1, queued) / Math.max(1, workers);
  const seconds = Math.ceil((perWorker * Math.max(0, meanJobMs)) / 1000);
  return Math.min(300, Math.max(1, seconds));
}
