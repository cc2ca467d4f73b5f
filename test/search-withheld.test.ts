import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';
import { labelNow } from './smtp-helpers.ts';
import { GTUBE, inbox, receive } from './emails-helpers.ts';
import { labelEmails } from '../src/labels/labeler.ts';
import { builtinProvider } from '../src/labels/provider.ts';

// Withheld mail (being labeled, or Junk) never matches a search by an API key, so neither the
// results nor their snippets can reveal it; its attachment files do not match either.

const word = () => `zq${Math.random().toString(36).slice(2, 9)}`;

describeEachDatabase('search: junk mail is withheld from API keys', (app) => {
  it('neither the junk email nor its attachment matches, by any field', async () => {
    const u = await app().user();
    const box = await inbox(app(), u);
    const secret = word();
    await receive(app(), box, { from: `Winner <${secret}@prizes.example>`, subject: `Prize ${secret}`, text: `Claim ${secret} ${GTUBE}`, attachments: [{ filename: `${secret}.txt`, content: `inside ${secret}`, contentType: 'text/plain' }] });
    await labelNow(app());
    for (const q of [secret, `from:${secret}`, `subject:${secret}`, `filename:${secret}`]) {
      const r = await app().request('GET', '/v1/search', { key: u.key, query: { q } });
      expect(r.status, r.text).toBe(200);
      expect(r.body.data.results, q).toEqual([]);
      const l = await app().request('GET', `/v1/mailboxes/${box.id}/emails`, { key: u.key, query: { q } });
      expect(l.body.data.emails, q).toEqual([]);
    }
    const files = await app().request('GET', `/v1/mailboxes/${box.id}/files`, { key: u.key, query: { q: secret, q_in: 'all' } });
    expect(files.body.data.files).toEqual([]);
  });
});

describeEachDatabase(
  'search: mail being labeled is withheld from API keys',
  (app) => {
    it('matches only once labeled', async () => {
      const u = await app().user();
      const box = await inbox(app(), u);
      const secret = word();
      const id = await receive(app(), box, { subject: `Note ${secret}`, text: 'hello' });
      const search = async () => (await app().request('GET', '/v1/search', { key: u.key, query: { q: secret } })).body.data.results.map((r: any) => r.id);
      expect(await search()).toEqual([]);
      const l = await app().request('GET', `/v1/mailboxes/${box.id}/emails`, { key: u.key, query: { q: secret } });
      expect(l.body.data.emails).toEqual([]);
      await labelEmails(app().started.deps, builtinProvider, [id]);
      expect(await search()).toEqual([id]);
    });
  },
  { CUBBY_ROLES: 'api,smtp' },
);
