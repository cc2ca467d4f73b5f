import { expect, it } from 'vitest';
import type { FilesTable, FileVersionsTable } from '../src/db/schema.ts';
import { newId } from '../src/ids.ts';
import { describeEachDatabase, type TestApp } from './harness.ts';
import { inbox } from './emails-helpers.ts';
import { signedIn } from './agent-helpers.ts';
import type { WebClient } from './web-client.ts';

// A folder larger than one page is walked completely with keyset links, in every sort, forwards
// and backwards; ties in the sort key are broken by the path, so no row is lost or repeated.

const COUNT = 1234; // two full pages of 500 and a partial one

async function seedFolder(app: TestApp, accountId: string, mailboxId: string): Promise<void> {
  const db = app.started.deps.db;
  const start = Date.parse('2026-01-01T00:00:00Z');
  for (let i = 0; i < COUNT; i += 400) {
    const files: FilesTable[] = [];
    const versions: FileVersionsTable[] = [];
    for (let j = i; j < Math.min(COUNT, i + 400); j++) {
      // Sizes and dates repeat (every 10 and every 7 files): the path must break the ties.
      const at = new Date(start + (j % 7) * 1000).toISOString();
      const fid = newId('df');
      const vid = newId('dfv');
      const name = `file-${String(j).padStart(5, '0')}.txt`;
      const p = `big/${name}`;
      files.push({
        id: fid, mailbox_id: mailboxId, account_id: accountId, path: p, live_path: p, folder: 'big', basename: name, role: 'source', created_by_system: 'api',
        current_version_id: vid, version_count: 1, read_at: null, read_by_user_id: null, read_by_api_key_id: null, created_by_user_id: null, created_by_api_key_id: null,
        created_by_agent: null, updated_by_user_id: null, updated_by_api_key_id: null, updated_by_agent: null, created_at: at, updated_at: at,
      } as FilesTable);
      versions.push({
        id: vid, file_id: fid, mailbox_id: mailboxId, version_number: 1, name, path: p, mime_type: 'text/plain', sha256: null, byte_size: (j % 10) * 100,
        reason: null, created_by_system: 'api', deleted: 0, mailbox_version_id: null, read_at: null, read_by_user_id: null, read_by_api_key_id: null,
        created_by_user_id: null, created_by_api_key_id: null, created_by_agent: null, created_at: at,
      });
    }
    await db.insertInto('files').values(files).execute();
    await db.insertInto('file_versions').values(versions).execute();
  }
}

const unescape = (s: string) => s.replace(/&amp;/g, '&');

async function page(c: WebClient, url: string) {
  const r = await c.get(url);
  expect(r.status, url).toBe(200);
  return {
    names: [...r.text.matchAll(/<a class="title" href="\/mailboxes\/bkt_\w+\/files\/df_\w+">([^<]+)<\/a>/g)].map((m) => m[1]!),
    next: r.text.match(/<a href="([^"]+)" rel="next">/)?.[1],
    prev: r.text.match(/<a href="([^"]+)" rel="prev">/)?.[1],
  };
}

/** Every page from `first` following Next, then back from the last following Previous. */
async function walk(c: WebClient, first: string) {
  const forward: string[][] = [];
  let url: string | undefined = first;
  let last = first;
  while (url) {
    const p = await page(c, unescape(url));
    forward.push(p.names);
    last = unescape(url);
    url = p.next;
  }
  const backward: string[][] = [];
  url = last;
  while (url) {
    const p = await page(c, unescape(url));
    backward.unshift(p.names);
    url = p.prev;
  }
  return { forward, backward };
}

describeEachDatabase('dashboard folder paging', (app) => {
  it('walks a folder of 1,234 files page by page in every sort, forwards and back', { timeout: 60_000 }, async () => {
    const owner = await app().user();
    const box = await inbox(app(), owner);
    await seedFolder(app(), owner.accountId, box.id);
    const c = await signedIn(app(), owner);
    const base = `/mailboxes/${box.id}/files?path=big`;

    const all = Array.from({ length: COUNT }, (_, j) => ({ name: `file-${String(j).padStart(5, '0')}.txt`, size: (j % 10) * 100, date: j % 7 }));
    const byKey = (key: 'name' | 'size' | 'date', desc: boolean) =>
      [...all]
        .sort((a, b) => {
          const k = key === 'name' ? 0 : (a[key] as number) - (b[key] as number);
          const order = k !== 0 ? k : a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
          return desc ? -order : order;
        })
        .map((f) => f.name);

    for (const [key, desc] of [['name', false], ['name', true], ['size', true], ['date', false]] as const) {
      const q = key === 'name' && !desc ? '' : `&sort=${key}${desc ? '&dir=desc' : ''}`;
      const { forward, backward } = await walk(c, `${base}${q}`);
      expect(forward.map((p) => p.length), `${key} ${desc}`).toEqual([500, 500, 234]);
      expect(forward.flat(), `${key} ${desc}`).toEqual(byKey(key, desc));
      // Previous from the last page lands on the same pages as the way there.
      expect(backward, `${key} ${desc} backwards`).toEqual(forward);
    }

    // The first page has no Previous; a malformed cursor is the first page, not an error.
    const first = await page(c, base);
    expect(first.prev).toBeUndefined();
    expect((await page(c, `${base}&after=not-a-cursor`)).names).toEqual(first.names);
    expect((await page(c, `${base}&sort=size&after=${Buffer.from('["x","y"]').toString('base64url')}`)).names).toEqual(byKey('size', false).slice(0, 500));
  });
});
