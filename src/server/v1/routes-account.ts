/** GET /api/v1/account and GET /api/v1/usage: the caller's balance, plan and use. */
import type { ServerResponse } from 'node:http';
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
