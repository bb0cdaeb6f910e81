/**
 * The job workers' pause during an inference outage (gpu_unavailable from an upstream that is
 * down, timing out or failing): no job is claimed for a delay that doubles with each outage in a
 * row, up to a maximum; a job that completes ends the streak.
 */
import { LIMITS } from '../limits.js';
import { callbackBackoffMs } from './backoff.js';

export class OutagePause {
  /** Outages in a row. */
  private streak = 0;
  private until = 0;
  private timer: NodeJS.Timeout | null = null;

  /** `resume`: called once a pause is over, to look at the queue again. */
  constructor(private readonly resume: () => void) {}

  /** No claims now. */
  get paused(): boolean {
    return Date.now() < this.until;
  }

  /** One more outage: pauses claims, and returns for how long (ms). */
  begin(): number {
    this.streak++;
    const delayMs = callbackBackoffMs(this.streak, LIMITS.upstreamOutageFirstDelayMs, LIMITS.upstreamOutageMaxDelayMs);
    this.until = Date.now() + delayMs;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.resume();
    }, delayMs);
    return delayMs;
  }

  /** A job completed: the inference works again. */
  end(): void {
    this.streak = 0;
  }

  /** The runner stops: no resume. */
  cancel(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
