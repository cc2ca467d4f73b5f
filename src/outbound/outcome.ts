import { AppError, ERROR_CATALOGUE } from '../errors.ts';

/** What one delivery attempt to one recipient came to. */
export interface Outcome {
  status: 'sent' | 'deferred' | 'bounced' | 'failed';
  /** The remote (or local) reply, one line, e.g. `250 2.0.0 Ok: queued as X`. */
  reply: string;
  /** `local`, `relay` or `mx:<host>`. */
  route: string;
}

export function oneLine(s: unknown, max = 500): string {
  return String(s ?? '').replace(/[\r\n]+/g, ' ').replace(/\s+/g, ' ').trim().slice(0, max);
}

/**
 * A refusal by our own inbound rules as an SMTP-style outcome: the catalogue's SMTP reply decides
 * (4xx defers, 5xx bounces); anything unexpected is temporary.
 */
export function outcomeOfLocalError(err: unknown): Outcome {
  if (err instanceof AppError) {
    const smtp = (ERROR_CATALOGUE[err.code] as { smtp?: { code: number; enhanced: string } }).smtp;
    if (smtp) return { status: smtp.code >= 500 ? 'bounced' : 'deferred', reply: oneLine(`${smtp.code} ${smtp.enhanced} ${err.message}`), route: 'local' };
    return { status: 'deferred', reply: oneLine(`451 4.3.0 ${err.code}`), route: 'local' };
  }
  return { status: 'deferred', reply: '451 4.3.0 local delivery failed; will retry', route: 'local' };
}
