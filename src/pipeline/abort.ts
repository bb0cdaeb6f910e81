/** How an aborted pipeline call ends: the caller's AbortSignal, checked between stages and raced against the model call. */
import { CutoutError } from '../errors.js';

/**
 * What an aborted call rejects with: the signal's reason when it is a CutoutError (the server's
 * sync deadline) or an error named AbortError (AbortController's default); else an AbortError
 * that carries the reason as its cause, as fetch does.
 */
export function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof CutoutError || (reason instanceof Error && reason.name === 'AbortError')) return reason;
  const err = new DOMException('The operation was aborted', 'AbortError');
  if (reason !== undefined) Object.defineProperty(err, 'cause', { value: reason });
  return err;
}

export function checkAborted(signal?: AbortSignal): void {
  if (signal?.aborted) throw abortError(signal);
}

/** `work`, or the signal's abort if that comes first: the work goes on and its result is dropped. */
export function unlessAborted<T>(work: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return work;
  if (signal.aborted) {
    work.catch(() => undefined);
    return Promise.reject(abortError(signal));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      work.catch(() => undefined);
      reject(abortError(signal));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

