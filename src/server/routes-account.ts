/** GET /api/v1/account and GET /api/v1/usage: the caller's balance, plan and use. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { guard } from './guards.js';
import { sendJson } from './http.js';
import type { AppContext } from './app.js';

export async function handleAccount(ctx: AppContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const caller = await guard(req, res, ctx);
  const info = await ctx.store.account(caller.accountId);
  sendJson(res, 200, {
    account_id: caller.accountId,
    balance: info.balance,
    plan: info.plan,
    credits_used_this_month: info.creditsUsedThisMonth,
    // The mode of the key making the call: a test key is never charged.
    test: caller.test,
  });
}

export async function handleUsage(ctx: AppContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const caller = await guard(req, res, ctx);
  const days = await ctx.store.usage(caller.accountId);
  sendJson(res, 200, { days: days.map((d) => ({ date: d.date, credits: d.credits, requests: d.requests })) });
}
