/**
 * SignInThrottle slows password guessing, per account (the email tried) and per source
 * address, in the store's VerificationStore (Redis when configured: shared by every node).
 * Work in progress (issue 13): this first version never blocks.
 */
import type { Store } from '../storage/ports.ts'
import type { Config } from '../config/config.ts'

export class SignInThrottle {
  constructor(_store: Store, _config: Config, _now: () => number) {}

  /** blocked: seconds until this email or address may try again, or 0 (no hash is computed while blocked). */
  async blocked(_email: string, _ip: string): Promise<number> {
    return 0
  }

  /** settle records one attempt's outcome (a success ends the email's run of failures) and returns the seconds now to wait, or 0. */
  async settle(_email: string, _ip: string, _ok: boolean): Promise<number> {
    return 0
  }
}
