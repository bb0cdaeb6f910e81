/**
 * An account's recent removals (store.ledger.recentRuns): the runs charged to it, newest first,
 * each with the confidence its result reported while that result is kept (the results row, or the
 * job's row, until --result-ttl purges them; older runs have none). Never a run's id: it is its
 * result's capability URL.
 */
import { parseResultFields } from '../result-fields.js';
import type { StoreContext } from './context.js';

/** Where a removal came from: the CLI, a sync API call, or a job (ledger.ts re-exports it). */
export type Channel = 'cli' | 'api' | 'job';

export interface RecentRun {
  /** When it was recorded, ms since the epoch (the store's clock). */
  at: number;
  channel: Channel;
  /** What the input was: "upload", "url example.com", a file name for the CLI. */
  input: string | null;
  size: 'preview' | 'full';
  credits: number;
  ms: number;
  /** 0..1; null once the result has expired (or for a run from before confidence was kept). */
  confidence: number | null;
}

export async function recentRuns(ctx: StoreContext, accountId: string, limit: number): Promise<RecentRun[]> {
  const rows = await ctx.db.all<{ created_at: number; channel: Channel; input: string | null; size: 'preview' | 'full'; credits: number; ms: number; fields: string | null; job_fields: string | null }>(
    `SELECT r.created_at, r.channel, r.input, r.size, r.credits, r.ms, res.result_fields AS fields, j.result_fields AS job_fields
       FROM runs r LEFT JOIN results res ON res.job_id = r.id LEFT JOIN jobs j ON j.id = r.id
      WHERE r.account_id = ? ORDER BY r.created_at DESC LIMIT ?`,
    [accountId, limit],
  );
  return rows.map((r) => {
    const fields = parseResultFields(r.fields) ?? parseResultFields(r.job_fields);
    return {
      at: Number(r.created_at), channel: r.channel, input: r.input, size: r.size, credits: Number(r.credits), ms: Number(r.ms),
      confidence: typeof fields?.confidence === 'number' ? fields.confidence : null,
    };
  });
}
