/** How an aborted pipeline call ends: the caller's AbortSignal, checked between stages and raced against the model call. */
import { abortError } from '../errors.js';

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

