/** GET /api/v1/account and GET /api/v1/usage: the caller's balance, plan and use. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { accountBody } from '../store/ledger.js';
import { guard } from './guards.js';
import { sendJson } from './http.js';
import type { AppContext } from './app.js';

export async function handleAccount(ctx: AppContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const caller = await guard(req, res, ctx);
  const info = await ctx.store.account(caller.accountId);
  sendJson(res, 200, accountBody(info, caller.test));
}

export async function handleUsage(ctx: AppContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const caller = await guard(req, res, ctx);
  const days = await ctx.store.usage(caller.accountId);
  sendJson(res, 200, { days: days.map((d) => ({ date: d.date, credits: d.credits, requests: d.requests })) });
}
