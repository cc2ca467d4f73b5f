import { expect, it } from 'vitest';
import { describeEachDatabase, type TestApp } from './harness.ts';
import { inbox, receive } from './emails-helpers.ts';
import { signedIn } from './agent-helpers.ts';
import { csrfOf } from './web-client.ts';
import { drain, listEmails, readEmail } from './outbound-helpers.ts';

// Forward from the dashboard carries the original's attachments through sendEmail: the mail a
// sender's client delivered over SMTP to one mailbox is forwarded to another own mailbox, which
// receives the same files. A file left unticked stays behind; the send limits are explained.

async function shaOf(app: TestApp, fileId: string): Promise<string> {
  const row = await app.started.deps.db
    .selectFrom('files')
    .innerJoin('file_versions', 'file_versions.id', 'files.current_version_id')
    .select('file_versions.sha256')
    .where('files.id', '=', fileId)
    .executeTakeFirstOrThrow();
  return row.sha256!;
}

const boxes = (html: string) => [...html.matchAll(/<input type="checkbox" name="attachment" value="(df_\w+)"( checked)?>/g)].map((m) => ({ id: m[1]!, checked: Boolean(m[2]) }));

describeEachDatabase('dashboard forward with attachments', (app) => {
  it('forwards mail received over SMTP with its attachments to another own mailbox', { timeout: 60_000 }, async () => {
    const owner = await app().user({ name: 'Forwarder' });
    const support = await inbox(app(), owner);
    const team = await inbox(app(), owner);
    const original = await receive(app(), support, {
      from: 'Partner <partner@example.net>',
      subject: 'Contract',
      text: 'See the files.',
      attachments: [
        { filename: 'contract.pdf', contentType: 'application/pdf', content: Buffer.from('%PDF-1.4 contract body') },
        { filename: 'terms.txt', contentType: 'text/plain', content: 'Terms and conditions\n' },
        { filename: 'logo.png', contentType: 'image/png', content: Buffer.from([137, 80, 78, 71, 1, 2, 3]) },
      ],
    });
    await drain(app()); // labeling
    const detail = await readEmail(app(), owner.key, support.id, original);
    const byName = new Map<string, { id: string }>(detail.attachments.map((a: { filename: string; id: string }) => [a.filename, a]));
    expect([...byName.keys()].sort()).toEqual(['contract.pdf', 'logo.png', 'terms.txt']);

    const c = await signedIn(app(), owner);
    const form = await c.get(`/mailboxes/${support.id}/compose?forward=${original}`);
    expect(form.status).toBe(200);
    expect(form.text).toContain('Forward: Contract');
    expect(boxes(form.text)).toEqual(detail.attachments.map((a: { id: string }) => ({ id: a.id, checked: true })));

    // Forward two of the three (logo.png unticked), plus an id from elsewhere that is ignored.
    const otherId = await receive(app(), support, { subject: 'Other', attachments: [{ filename: 'x.txt', content: 'x' }] });
    await drain(app());
    const stray = (await readEmail(app(), owner.key, support.id, otherId)).attachments[0].id;
    const sent = await c.request('POST', `/mailboxes/${support.id}/compose`, {
      _csrf: csrfOf(form.text),
      to: team.address,
      subject: 'Fwd: Contract',
      text: 'Forwarding.',
      forward_of: original,
      attachment: [byName.get('contract.pdf')!.id, byName.get('terms.txt')!.id, stray],
    });
    expect(sent.status, sent.text).toBe(303);
    await drain(app());
    const arrived = (await listEmails(app(), owner.key, team.id)).filter((e) => e.subject === 'Fwd: Contract');
    expect(arrived).toHaveLength(1);
    const got = await readEmail(app(), owner.key, team.id, arrived[0].id);
    expect(got.attachments.map((a: { filename: string }) => a.filename).sort()).toEqual(['contract.pdf', 'terms.txt']);
    for (const a of got.attachments) expect(await shaOf(app(), a.id)).toBe(await shaOf(app(), byName.get(a.filename)!.id));
  });

  it('explains the attachment limit and sends nothing', { timeout: 60_000 }, async () => {
    const owner = await app().user({ name: 'Limit Tester' });
    const support = await inbox(app(), owner);
    const team = await inbox(app(), owner);
    const original = await receive(app(), support, {
      subject: 'Many files',
      attachments: Array.from({ length: 21 }, (_, i) => ({ filename: `part-${i}.txt`, content: `part ${i}\n` })),
    });
    const c = await signedIn(app(), owner);
    const form = await c.get(`/mailboxes/${support.id}/compose?forward=${original}`);
    expect(form.text).toMatch(/at most 20 files and 25 MB together; these are 21 files/);
    const ids = boxes(form.text).map((b) => b.id);
    expect(ids).toHaveLength(21);
    const refused = await c.request('POST', `/mailboxes/${support.id}/compose`, { _csrf: csrfOf(form.text), to: team.address, subject: 'Fwd: Many files', text: '', forward_of: original, attachment: ids });
    expect(refused.status).toBe(422);
    expect(refused.text).toMatch(/At most 20 attachments/);
    // What was ticked stays ticked on the form shown again.
    expect(boxes(refused.text).every((b) => b.checked)).toBe(true);
    await drain(app());
    expect((await listEmails(app(), owner.key, team.id)).filter((e) => e.subject === 'Fwd: Many files')).toHaveLength(0);
  });
});
