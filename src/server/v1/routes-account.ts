/** GET /api/v1/account, GET /api/v1/usage and GET /api/v1/removals: the caller's balance, plan and use. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CutoutError } from '../../errors.js';
import { accountBody } from '../../store/ledger.js';
import type { ServerContext } from '../context.js';
import type { Caller } from '../guards.js';
import { sendJson } from '../http.js';

export async function handleAccount(ctx: Pick<ServerContext, 'store'>, res: ServerResponse, caller: Caller): Promise<void> {
  const info = await ctx.store.ledger.account(caller.accountId);
  sendJson(res, 200, accountBody(info, caller.test));
}

export async function handleUsage(ctx: Pick<ServerContext, 'store'>, res: ServerResponse, caller: Caller): Promise<void> {
  const days = await ctx.store.ledger.usage(caller.accountId);
  sendJson(res, 200, { days: days.map((d) => ({ date: d.date, credits: d.credits, requests: d.requests })) });
}

/** How many recent removals GET /api/v1/removals answers: `limit`, default and ceiling. */
export const REMOVALS_LIMIT = Object.freeze({ default: 20, max: 100 });

function limitOf(req: IncomingMessage): number {
  const given = new URL(req.url ?? '/', 'http://x').searchParams.get('limit');
  if (given === null || given === '') return REMOVALS_LIMIT.default;
  const n = Number(given);
  if (!Number.isInteger(n) || n < 1 || n > REMOVALS_LIMIT.max) {
    throw new CutoutError('invalid_request', `Expected a whole number from 1 to ${REMOVALS_LIMIT.max} for limit but received ${JSON.stringify(given)}`, { param: 'limit' });
  }
  return n;
}

/**
 * The caller's account's most recent removals (every key of the account, every door), newest first,
 * with the confidence of each result while it is kept: what the account page lists. No run or
 * result id: each is a result's capability URL.
 */
export async function handleRemovals(ctx: Pick<ServerContext, 'store'>, req: IncomingMessage, res: ServerResponse, caller: Caller): Promise<void> {
  const runs = await ctx.store.ledger.recentRuns(caller.accountId, limitOf(req));
  sendJson(res, 200, {
    removals: runs.map((r) => ({
      created_at: new Date(r.at).toISOString(), channel: r.channel, input: r.input, size: r.size, credits: r.credits, ms: r.ms, confidence: r.confidence,
    })),
  });
}
