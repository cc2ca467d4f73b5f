// The database a benchmark's server uses: SQLite in its data dir (the default), or Postgres when
// BENCH_DATABASE_URL is set (a fresh schema per run, dropped at the end). SERVE_ENV adds server
// settings ("CUBBY_A=1 CUBBY_B=2"): serveEnv() keeps the runner's own CUBBY_* out of the server.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { procStat } from './lib.ts';

export interface BenchDatabase {
  kind: 'sqlite' | 'postgres';
  /** Server settings for it, SERVE_ENV's included. */
  env: Record<string, string>;
  drop(): Promise<void>;
  /**
   * The pid of the Postgres server's postmaster when it runs on this machine and /proc shows it
   * (its CPU is then read with bench/lib.ts processTreeCpuSeconds); null otherwise (SQLite, or a
   * server elsewhere).
   */
  postmasterPid(): Promise<number | null>;
}

export function benchDatabase(name: string): BenchDatabase {
  const url = process.env.BENCH_DATABASE_URL;
  const extra = Object.fromEntries(
    (process.env.SERVE_ENV ?? '').split(/\s+/).filter(Boolean).map((kv) => {
      const at = kv.indexOf('=');
      if (at < 1) throw new Error(`SERVE_ENV: "${kv}" is not NAME=value`);
      return [kv.slice(0, at), kv.slice(at + 1)];
    }),
  );
  if (!url) return { kind: 'sqlite', env: extra, drop: async () => undefined, postmasterPid: async () => null };
  const schema = `bench_${name}_${randomBytes(4).toString('hex')}`;
  return {
    kind: 'postgres',
    env: { CUBBY_DATABASE_URL: url, CUBBY_DATABASE_SCHEMA: schema, ...extra },
    async drop() {
      // KEEP_SCHEMA=1 leaves it for a look afterwards (as KEEP_RUN_DIR leaves the run's folder).
      if (process.env.KEEP_SCHEMA) {
        console.error(`kept schema ${schema}`);
        return;
      }
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await c.end();
    },
    async postmasterPid() {
      // This connection's backend is a child of the postmaster: its parent in /proc, if it is here.
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        const { rows } = await c.query<{ pid: number }>('select pg_backend_pid() as pid');
        return parentPid(rows[0]!.pid);
      } finally {
        await c.end();
      }
    },
  };
}

/** The parent of a process on this machine, or null when /proc does not show it. */
function parentPid(pid: number): number | null {
  try {
    const ppid = Number(procStat(pid)[1]);
    return Number.isInteger(ppid) && ppid > 1 ? ppid : null;
  } catch {
    return null;
  }
}
