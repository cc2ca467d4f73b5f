/**
 * Group commit: submissions that arrive while a commit runs are written together by the next one,
 * so a burst of messages shares one transaction (and one WAL fsync on SQLite) instead of queueing
 * for one each. When a grouped commit fails, each submission is retried alone, so one bad message
 * never fails the others. A commit may return `durable` (src/db/durable-commit.ts): its submitters
 * are answered when that resolves, and the next group is committed meanwhile, so waiting for the
 * disk neither blocks the event loop nor stops the next group.
 */
export class GroupCommit<T> {
  private waiting: { items: T[]; settle: (err?: unknown) => void }[] = [];
  private running = false;

  constructor(
    private readonly commit: (items: T[]) => Promise<void | { durable: Promise<void> }>,
    /** Items per transaction at most: bounds lock time and memory. */
    private readonly maxItems = 200,
  ) {}

  submit(items: T[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ items, settle: (err) => (err === undefined ? resolve() : reject(err)) });
      if (!this.running) void this.run();
    });
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      while (this.waiting.length) {
        // Let I/O that already finished (other messages' blob fsyncs) join this group.
        await new Promise((r) => setImmediate(r));
        const group = [];
        let n = 0;
        while (this.waiting.length && (n === 0 || n + this.waiting[0]!.items.length <= this.maxItems)) {
          const w = this.waiting.shift()!;
          n += w.items.length;
          group.push(w);
        }
        try {
          const committed = await this.commit(group.flatMap((w) => w.items));
          settleWhenDurable(committed, group);
        } catch (err) {
          if (group.length === 1) {
            group[0]!.settle(err);
            continue;
          }
          for (const w of group) {
            try {
              settleWhenDurable(await this.commit(w.items), [w]);
            } catch (e) {
              w.settle(e);
            }
          }
        }
      }
    } finally {
      this.running = false;
    }
  }
}

function settleWhenDurable(committed: void | { durable: Promise<void> }, group: { settle: (err?: unknown) => void }[]): void {
  if (!committed) {
    for (const w of group) w.settle();
    return;
  }
  committed.durable.then(
    () => group.forEach((w) => w.settle()),
    // Committed but not known to be on disk: the sender is told to try again (a retry may duplicate, never lose).
    (err: unknown) => group.forEach((w) => w.settle(err ?? new Error('commit not durable'))),
  );
}
