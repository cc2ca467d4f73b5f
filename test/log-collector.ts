// Collects the app's log lines (AppOptions.logDestination) as parsed JSON objects, and lets a
// test wait for the line it expects: lines are written after a response is sent, so a test that
// has its answer may not have its line yet.

export type LogLine = Record<string, any>;

export class LogCollector {
  readonly lines: LogLine[] = [];
  /** Everything written, as text (to check that a secret appears nowhere). */
  text = '';
  private waiters: { match: (l: LogLine) => boolean; resolve: (l: LogLine) => void }[] = [];

  write(chunk: string): void {
    this.text += chunk;
    for (const raw of chunk.split('\n')) {
      if (!raw.trim()) continue;
      const line = JSON.parse(raw) as LogLine;
      this.lines.push(line);
      this.waiters = this.waiters.filter((w) => {
        if (!w.match(line)) return true;
        w.resolve(line);
        return false;
      });
    }
  }

  /** The first line (already written or yet to come) that matches. */
  next(match: (l: LogLine) => boolean): Promise<LogLine> {
    const found = this.lines.find(match);
    if (found) return Promise.resolve(found);
    return new Promise((resolve) => this.waiters.push({ match, resolve }));
  }
}
