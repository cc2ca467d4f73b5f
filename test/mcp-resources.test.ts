import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { expect, it } from 'vitest';
import { describeEachDatabase, type TestApp } from './harness.ts';
import { labelNow } from './smtp-helpers.ts';
import { GTUBE, inbox, receive } from './emails-helpers.ts';
import { mcpUrl } from './agent-helpers.ts';

// MCP resources (cubby:// mailboxes, files and emails) and prompts through the official client:
// the same tenancy, key scope and withholding as the tools and the API.

async function connect(app: TestApp, token: string): Promise<Client> {
  const client = new Client({ name: 'cubby-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl(app)), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return client;
}

describeEachDatabase('MCP resources and prompts', (app) => {
  it('lists mailboxes, reads files and emails by cubby:// URI; withheld mail and other mailboxes stay out of reach', async () => {
    const user = await app().user();
    const box = await inbox(app(), user);
    const other = await inbox(app(), user);
    const good = await receive(app(), box, { subject: 'hello', text: 'a normal note' });
    const junk = await receive(app(), box, { subject: 'win', text: `free money ${GTUBE}` });
    await labelNow(app());
    const client = await connect(app(), user.key);
    let fileWritten = false;
    try {
      expect(client.getServerCapabilities()).toMatchObject({ resources: {}, prompts: {} });
      const { resourceTemplates } = await client.listResourceTemplates();
      expect(resourceTemplates.map((t) => t.uriTemplate).sort()).toEqual(['cubby://mailboxes/{mailbox_id}', 'cubby://mailboxes/{mailbox_id}/emails/{email_id}', 'cubby://mailboxes/{mailbox_id}/files/{+path}']);
      const { resources } = await client.listResources();
      expect(resources.map((r) => r.uri)).toEqual(expect.arrayContaining([`cubby://mailboxes/${box.id}`, `cubby://mailboxes/${other.id}`]));

      const mb = await client.readResource({ uri: `cubby://mailboxes/${box.id}` });
      expect(JSON.parse((mb.contents[0] as { text: string }).text).mailbox.id).toBe(box.id);

      const w = await client.callTool({ name: 'mailbox_file_write', arguments: { mailbox_id: box.id, path: 'notes/a b.md', content: '# Notes\n' } });
      fileWritten = !w.isError;
      const file = await client.readResource({ uri: `cubby://mailboxes/${box.id}/files/notes/a%20b.md` });
      expect(file.contents[0]).toMatchObject({ uri: `cubby://mailboxes/${box.id}/files/notes/a%20b.md`, text: '# Notes\n' });

      const email = await client.readResource({ uri: `cubby://mailboxes/${box.id}/emails/${good}` });
      const detail = JSON.parse((email.contents[0] as { text: string }).text).email;
      expect(detail.id).toBe(good);
      expect(detail.body_text).toContain('a normal note');

      // Withheld (junk) mail: the email shows no content, as over the API and the tools.
      const viaTool = (await client.callTool({ name: 'email_get', arguments: { mailbox_id: box.id, email_id: junk } })) as any;
      const junkRes = await client.readResource({ uri: `cubby://mailboxes/${box.id}/emails/${junk}` }).then(
        (r) => JSON.parse((r.contents[0] as { text: string }).text),
        (e: Error) => ({ error: e.message }),
      );
      expect(JSON.stringify(junkRes)).not.toContain('free money');
      if (viaTool.isError) expect(junkRes.error).toBeDefined();
      else expect(junkRes.email.body_text ?? null).toBe(viaTool.structuredContent.email.body_text ?? null);
      // Its raw files under _email/ are refused outright.
      const emlPath = (await app().started.deps.db.selectFrom('files').select('path').where('mailbox_id', '=', box.id).where('path', 'like', `%/${junk}/message.eml`).executeTakeFirstOrThrow()).path;
      await expect(client.readResource({ uri: `cubby://mailboxes/${box.id}/files/${emlPath}` })).rejects.toThrow(/withheld/i);
      await expect(client.readResource({ uri: `cubby://mailboxes/${box.id}/files/missing.txt` })).rejects.toThrow(/no file/i);
    } finally {
      await client.close();
    }
    expect(fileWritten).toBe(true);

    // A key limited to the other mailbox: this one answers like a missing one, and is not listed.
    const limited = await connect(app(), await app().key(user, { scope: 'mailbox_read', mailboxAccess: 'selected', mailboxPermissions: { [other.id]: 'read' } }));
    try {
      const { resources } = await limited.listResources();
      expect(resources.map((r) => r.uri)).toEqual([`cubby://mailboxes/${other.id}`]);
      for (const uri of [`cubby://mailboxes/${box.id}`, `cubby://mailboxes/${box.id}/files/notes/a%20b.md`, `cubby://mailboxes/${box.id}/emails/${good}`]) {
        await expect(limited.readResource({ uri }), uri).rejects.toThrow(/not found/i);
      }
    } finally {
      await limited.close();
    }
  });

  it('offers the triage, summary and publishing prompts with their arguments', async () => {
    const user = await app().user();
    const client = await connect(app(), user.key);
    try {
      const { prompts } = await client.listPrompts();
      expect(prompts.map((p) => p.name).sort()).toEqual(['publish_folder', 'summarize_conversation', 'triage_new_mail']);
      expect(prompts.find((p) => p.name === 'summarize_conversation')!.arguments!.map((a) => a.name).sort()).toEqual(['conversation_id', 'mailbox_id']);
      const p = await client.getPrompt({ name: 'publish_folder', arguments: { mailbox_id: 'bkt_x', folder: 'site' } });
      const text = (p.messages[0]!.content as { text: string }).text;
      expect(text).toContain('publication_root_directory="site"');
      expect(text).toMatch(/only after I confirm/i);
      const t = await client.getPrompt({ name: 'triage_new_mail', arguments: { mailbox_id: 'bkt_x' } });
      expect((t.messages[0]!.content as { text: string }).text).toMatch(/untrusted/i);
      await expect(client.getPrompt({ name: 'triage_new_mail', arguments: {} })).rejects.toThrow();
    } finally {
      await client.close();
    }
  });
}, {});
