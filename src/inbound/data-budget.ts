import { EventEmitter } from 'node:events';

/**
 * A bound on the DATA bytes all SMTP sessions of this process hold in memory at once. The pipeline
 * keeps each message's bytes while it streams to the store (parsing and authentication need them),
 * so without a bound 500 clients sending 64 MiB messages could ask for 32 GiB. A message that would
 * take the total over the bound is answered 451 4.3.2 (the sender retries later); a message alone in
 * flight is always admitted, so a bound below the largest message cannot refuse mail for ever.
 */
export class DataBudget extends EventEmitter<{ change: [inUse: number] }> {
  private used = 0;

  constructor(readonly maxBytes: number) {
    super();
  }

  /** Bytes held by all messages now (for tests and metrics). */
  get inUse(): number {
    return this.used;
  }

  /** A per-message account: grows chunk by chunk, given back whole by release(). */
  open(): DataReservation {
    return new DataReservation(this);
  }

  /** @internal */
  tryTake(held: number, n: number): boolean {
    if (this.used + n > this.maxBytes && this.used !== held) return false;
    this.used += n;
    this.emit('change', this.used);
    return true;
  }

  /** @internal */
  give(n: number): void {
    this.used = Math.max(0, this.used - n);
    this.emit('change', this.used);
  }
}

export class DataReservation {
  private held = 0;
  private released = false;

  constructor(private readonly budget: DataBudget) {}

  /** Takes `n` more bytes, or false when the process holds too much DATA already. */
  take(n: number): boolean {
    if (this.released) return false;
    if (!this.budget.tryTake(this.held, n)) return false;
    this.held += n;
    return true;
  }

  /** Gives every byte back; idempotent. */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.budget.give(this.held);
    this.held = 0;
  }
}

/** Thrown into the DATA stream when the budget is spent: answered 451 4.3.2, the sender retries. */
export class DataBudgetExceeded extends Error {
  override readonly name = 'DataBudgetExceeded';
  readonly responseCode = 451;
  constructor() {
    super('4.3.2 too much mail in flight; try again later');
  }
}

const budgets = new WeakMap<object, DataBudget>();

/** The budget of one running app (its deps): every SMTP listener on them shares it. */
export function dataBudgetOf(deps: { config: { smtpMaxDataInFlightBytes: number } }): DataBudget {
  let b = budgets.get(deps);
  if (!b) budgets.set(deps, (b = new DataBudget(deps.config.smtpMaxDataInFlightBytes)));
  return b;
}
