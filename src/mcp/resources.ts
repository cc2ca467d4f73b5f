import { ResourceTemplate, type McpServer } from '@modelcontextprotocol/server';
import type { RequestCtx } from '../context.ts';
import { listMailboxes } from '../mailboxes/mailboxes.list.ts';
import { loadMailbox } from '../mailboxes/mailboxes.service.ts';
import { presentMailbox } from '../mailboxes/mailboxes.present.ts';
import { readEmail } from '../emails/emails.service.ts';
import { presentOneDetail, viewerOf } from '../emails/emails.present.ts';
import { readFileForAgent } from './tools.files.ts';
import { UNTRUSTED } from './tool.ts';

// MCP resources: the same data as the read tools, addressed by cubby:// URIs so a client can
// attach a file or an email to a conversation. Every read goes through the tools' service
// functions with the request's context, so tenancy, key scope and withholding (junk mail shows
// no content; its _email/ files are refused) are exactly those of the API.
//
//   cubby://mailboxes/{mailbox_id}                 the mailbox (JSON); listed
//   cubby://mailboxes/{mailbox_id}/files/{+path}   a file: its text, or metadata and a download link
//   cubby://mailboxes/{mailbox_id}/emails/{email_id}  an email with its text body (JSON)

const JSON_TYPE = 'application/json';

function one(v: string | string[] | undefined): string {
  return Array.isArray(v) ? (v[0] ?? '') : (v ?? '');
}

function json(uri: URL, data: unknown) {
  return { contents: [{ uri: uri.href, mimeType: JSON_TYPE, text: JSON.stringify(data, null, 2) }] };
}

export function registerResources(server: McpServer, ctx: RequestCtx): void {
  server.registerResource(
    'mailbox',
    new ResourceTemplate('cubby://mailboxes/{mailbox_id}', {
      list: async () => {
        const { page } = await listMailboxes(ctx, { status: 'active', limit: 100 });
        return { resources: page.items.map((m) => ({ uri: `cubby://mailboxes/${m.id}`, name: m.title ?? m.id, mimeType: JSON_TYPE })) };
      },
    }),
    { title: 'Mailbox', description: 'A mailbox: title, receiving address, counts.', mimeType: JSON_TYPE },
    async (uri, vars) => {
      const { mailbox, perms, access } = await loadMailbox(ctx, undefined, one(vars.mailbox_id), 'read');
      return json(uri, { mailbox: presentMailbox(ctx, mailbox, perms, access) });
    },
  );

  server.registerResource(
    'mailbox_file',
    new ResourceTemplate('cubby://mailboxes/{mailbox_id}/files/{+path}', { list: undefined }),
    { title: 'Mailbox file', description: `A file by path; text up to 256 KiB inline, other files as metadata with a temporary download link. ${UNTRUSTED}` },
    async (uri, vars) => {
      const out = await readFileForAgent(ctx, { mailboxId: one(vars.mailbox_id), path: decodeURIComponent(one(vars.path)) });
      if (typeof out.content === 'string') {
        return { contents: [{ uri: uri.href, mimeType: (out.file as { mime_type?: string }).mime_type ?? 'text/plain', text: out.content }] };
      }
      return json(uri, out);
    },
  );

  server.registerResource(
    'email',
    new ResourceTemplate('cubby://mailboxes/{mailbox_id}/emails/{email_id}', { list: undefined }),
    { title: 'Email', description: `One email with its text body and attachment list; reading does not mark it read. ${UNTRUSTED}`, mimeType: JSON_TYPE },
    async (uri, vars) => {
      const email = await readEmail(ctx, { mailboxId: one(vars.mailbox_id), emailId: one(vars.email_id) });
      return json(uri, { email: await presentOneDetail(ctx.db, email, viewerOf(ctx)) });
    },
  );
}
