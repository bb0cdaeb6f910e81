/**
 * The sync-removal door policy, once for every API that answers a removal in its response (v1's
 * `POST /api/v1/remove`, remove.bg's `/v1.0/removebg`, rembg's `/api/remove`, and the dialects
 * to come): what a door does between its parsed request and its rendered answer.
 *   - a test key's result is a preview (free), with the door's own cap on top;
 *   - the work holds one of the server's pool slots while the model runs;
 *   - a hard deadline: past it the answer is 504 processing_failed and nothing is charged; the
 *     charge and store run inside `commit`, which the deadline no longer interrupts once begun;
 *   - a client that hangs up stops the work at once (its slot is freed for the next caller, and
 *     nothing is charged): an abandoned removal is never finished for nobody.
 * A door is then a parser, a renderer and a header map around `runSyncRemoval`.
 */
import type { ServerResponse } from 'node:http';
import { CutoutError } from '../errors.js';
import { payerOfCaller } from '../billing.js';
import type { RemoveRequest } from '../pipeline/types.js';
import type { Intake, Removal, Removed } from '../service/removal.js';
import type { Caller } from './guards.js';
import type { ServerContext } from './context.js';

export type SyncRemovalContext = Pick<ServerContext, 'pool' | 'removals'>;

export interface SyncRemoval {
  caller: Caller;
  /** The door's request (this call's own object); for a test key the policy makes it a preview (with `testPreview` on top). */
  request: RemoveRequest;
  /** What a test key's preview also gets at this door (remove.bg's preview area). */
  testPreview?: Partial<RemoveRequest>;
  /** The deadline of this door, in ms. */
  deadlineMs: number;
  /**
   * The image, or how to get it once the work runs (given the work's signal: a hang-up stops a
   * fetch too), alone or as an Intake with its background and what the image decides.
   */
  input: Buffer | ((signal: AbortSignal) => Promise<Buffer | Intake>);
  /** The run's id (the stored result's, the Idempotency-Key's outcome). */
  id: string;
  description: string;
  storeResult?: Removal['storeResult'];
  within?: Removal['within'];
}

function timeoutError(ms: number): CutoutError {
  return new CutoutError('processing_failed', `Processing took longer than the ${ms / 1000} s sync limit; nothing was charged. Large images go through POST /api/v1/jobs.`, { status: 504, reason: 'deadline' });
}

/**
 * Runs `work` under a hard deadline. `work` gets the abort signal and `commit`: the final step
 * (charge and store) must run inside `commit`, which refuses once the deadline has passed and,
 * once started, stops the deadline from firing.
 */
export function withDeadline<T>(ms: number, work: (signal: AbortSignal, commit: <R>(step: () => Promise<R>) => Promise<R>) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  let committing = false;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      if (committing) return;
      const err = timeoutError(ms);
      controller.abort(err);
      reject(err);
    }, ms);
  });
  expired.catch(() => undefined);
  const commit = <R>(step: () => Promise<R>): Promise<R> => {
    if (controller.signal.aborted) return Promise.reject(controller.signal.reason);
    committing = true;
    clearTimeout(timer);
    return step();
  };
  const done = work(controller.signal, commit);
  done.catch(() => undefined); // after a timeout its late failure has nobody to tell
  return Promise.race([done, expired]).finally(() => clearTimeout(timer));
}

/** The error a hang-up aborts the work with: nobody reads it, but the logs and metrics do. */
function hungUp(): CutoutError {
  return new CutoutError('processing_failed', 'The client closed the connection.', { reason: 'client_closed' });
}

/** Runs one sync removal under the door policy (the header says what it holds). */
export async function runSyncRemoval(ctx: SyncRemovalContext, res: ServerResponse, spec: SyncRemoval): Promise<Removed> {
  // The door's own request object: a test key's preview is set on it here, before the input step
  // (which may read it); what that step learns comes back as an Intake, set by the service.
  const request: RemoveRequest = spec.request;
  if (spec.caller.test) Object.assign(request, { size: 'preview' }, spec.testPreview);
  return withDeadline(spec.deadlineMs, async (deadline, commit) => {
    const closed = new AbortController();
    const hangUp = () => {
      if (!res.writableEnded) closed.abort(hungUp());
    };
    res.once('close', hangUp);
    const signal = AbortSignal.any([deadline, closed.signal]);
    const input = spec.input;
    try {
      return await ctx.removals.removeAndRecord({
        id: spec.id,
        request,
        payer: payerOfCaller(spec.caller),
        input: Buffer.isBuffer(input) ? input : () => input(signal),
        channel: 'api',
        description: spec.description,
        storeResult: spec.storeResult,
        signal,
        slot: (work) => ctx.pool.run(work, { signal }),
        commit,
        within: spec.within,
      });
    } finally {
      res.off('close', hangUp);
    }
  });
}
