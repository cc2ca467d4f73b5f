import { z } from 'zod';
import type { McpServer } from '@modelcontextprotocol/server';
import type { RequestCtx } from '../context.ts';
import { mailboxPermissions, reachableAccounts, selectAccount, toAccess } from '../auth/access.ts';
import { loadStatus } from '../accounts/status.service.ts';
import { presentAccountIdentity } from '../accounts/accounts.present.ts';
import { archiveMailbox, createMailbox, deleteMailbox, loadMailbox, unarchiveMailbox, updateMailbox } from '../mailboxes/mailboxes.service.ts';
import { listMailboxes } from '../mailboxes/mailboxes.list.ts';
import { presentMailbox } from '../mailboxes/mailboxes.present.ts';
import { MAX_DESCRIPTION, MAX_TITLE } from '../mailboxes/mailbox-fields.ts';
import { SERVER_VERSION } from '../version.ts';
import { addTool, UNTRUSTED } from './tool.ts';

// Status, accounts and mailboxes (buckets): the same service calls as GET /v1/status,
// /v1/accounts and /v1/mailboxes.

const mailboxId = z.string().min(1).max(100).describe('bkt_… id of the mailbox');
const page = {
  limit: z.number().int().min(1).max(100).optional().describe('Page size, 1 to 100 (default 50)'),
  cursor: z.string().max(2048).optional().describe("The previous page's pagination.next_cursor"),
};

export function mailboxTools(server: McpServer, ctx: RequestCtx): void {
  addTool(server, ctx, 'status', {
    title: 'Connection status',
    description: 'The account, the accounts this connection may select, what this connection may do (scope, mailboxes, expiry, renewal) and the server version. Call it first.',
    input: {},
    readOnly: true,
    run: async (c, a) => {
      const s = await loadStatus(c, a.account_id);
      return {
        connected: true,
        account: s.account,
        default_account_id: s.default_account_id,
        accounts: s.accounts,
        server_version: s.server_version,
        client_version: s.client_version,
        connection: s.connection,
        user: s.user,
        dashboard_url: s.dashboard_url,
        mcp: { server_version: SERVER_VERSION },
      };
    },
  });

  addTool(server, ctx, 'account_list', {
    title: 'List accounts',
    description: "The connection's account and the client accounts it may select with account_id.",
    input: {},
    readOnly: true,
    run: async (c, a) => {
      if (a.account_id !== undefined) await selectAccount(c.db, c.credential, a.account_id);
      const reachable = await reachableAccounts(c.db, c.credential);
      const accounts = [...reachable.values()].sort((x, y) => (x.account.id < y.account.id ? -1 : 1));
      return { accounts: accounts.map((r) => presentAccountIdentity(r.account, toAccess(c.credential, r.account, r.role), c.credential, reachable)), default_account_id: c.credential.defaultAccountId };
    },
  });

  addTool(server, ctx, 'mailbox_list', {
    title: 'List mailboxes',
    description: 'Mailboxes (buckets) this connection can reach, newest first, with counts. Each mailbox has its own receiving email address.',
    input: { status: z.enum(['active', 'archived', 'all']).optional(), q: z.string().max(200).optional().describe('Text in id, title or address'), ...page },
    readOnly: true,
    run: async (c, a) => {
      const { access, page: p, counts } = await listMailboxes(c, { accountId: a.account_id, status: a.status ?? 'active', q: a.q, limit: a.limit ?? 50, cursor: a.cursor });
      return { mailboxes: p.items.map((m) => presentMailbox(c, m, mailboxPermissions(c.credential, access, m.id)!, access)), counts, pagination: p.pagination };
    },
  });

  addTool(server, ctx, 'mailbox_get', {
    title: 'Read a mailbox',
    description: 'One mailbox with its address, counts and the actions allowed (archive, unarchive, delete with its confirmation string).',
    input: { mailbox_id: mailboxId },
    readOnly: true,
    run: async (c, a) => {
      const { mailbox, perms, access } = await loadMailbox(c, a.account_id, a.mailbox_id, 'read');
      return { mailbox: presentMailbox(c, mailbox, perms, access) };
    },
  });

  addTool(server, ctx, 'mailbox_create', {
    title: 'Create a mailbox',
    description: 'Creates a mailbox with its own receiving address. Never retry automatically: on an unknown result list mailboxes first.',
    input: {
      title: z.string().max(MAX_TITLE).nullable().optional(),
      description: z.string().max(MAX_DESCRIPTION).nullable().optional(),
      metadata: z.record(z.string(), z.unknown()).optional().describe('Application data'),
      username: z.string().max(100).optional().describe('Email username prefix; a random suffix is added'),
      domain: z.string().max(253).optional(),
    },
    run: async (c, a) => {
      const { mailbox, perms, access } = await createMailbox(c, { accountId: a.account_id, title: a.title, description: a.description, metadata: a.metadata, username: a.username, domain: a.domain, reason: a.reason ?? null, field: 'mailbox' });
      return { mailbox: presentMailbox(c, mailbox, perms, access) };
    },
  });

  addTool(server, ctx, 'mailbox_update', {
    title: 'Update a mailbox',
    description: 'Changes title, description or metadata (metadata replaces the whole object). Send expected_metadata_version from a read to avoid overwriting a concurrent change.',
    input: {
      mailbox_id: mailboxId,
      title: z.string().max(MAX_TITLE).nullable().optional(),
      description: z.string().max(MAX_DESCRIPTION).nullable().optional(),
      metadata: z.record(z.string(), z.unknown()).optional(),
      expected_metadata_version: z.string().max(100).nullable().optional(),
    },
    // metadata replaces the whole object
    destructive: true,
    idempotent: true,
    run: async (c, a) => {
      const { mailbox, perms, access } = await updateMailbox(c, a.mailbox_id, { accountId: a.account_id, title: a.title, description: a.description, metadata: a.metadata, expectedMetadataVersion: a.expected_metadata_version, reason: a.reason ?? null, field: 'mailbox' });
      return { mailbox: presentMailbox(c, mailbox, perms, access) };
    },
  });

  addTool(server, ctx, 'mailbox_archive', {
    title: 'Archive a mailbox',
    description: 'Makes the mailbox read-only; files and emails are kept.',
    input: { mailbox_id: mailboxId },
    idempotent: true,
    run: async (c, a) => {
      const { mailbox, perms, access } = await archiveMailbox(c, a.mailbox_id, { accountId: a.account_id, reason: a.reason });
      return { mailbox: presentMailbox(c, mailbox, perms, access) };
    },
  });

  addTool(server, ctx, 'mailbox_unarchive', {
    title: 'Unarchive a mailbox',
    description: 'Makes an archived mailbox writable again (needs admin permission).',
    input: { mailbox_id: mailboxId },
    idempotent: true,
    run: async (c, a) => {
      const { mailbox, perms, access } = await unarchiveMailbox(c, a.mailbox_id, { accountId: a.account_id, reason: a.reason });
      return { mailbox: presentMailbox(c, mailbox, perms, access) };
    },
  });

  addTool(server, ctx, 'mailbox_delete', {
    title: 'Delete an archived mailbox',
    description: 'Deletes an archived mailbox for good. confirmation must equal delete.confirmation from mailbox_get. Only on the owner\'s explicit request.',
    input: { mailbox_id: mailboxId, confirmation: z.string().max(200) },
    destructive: true,
    idempotent: true,
    run: (c, a) => deleteMailbox(c, a.mailbox_id, { accountId: a.account_id, confirmation: a.confirmation, reason: a.reason }),
  });
}

export { UNTRUSTED };
