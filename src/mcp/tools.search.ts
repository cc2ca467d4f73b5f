import { z } from 'zod';
import type { McpServer } from '@modelcontextprotocol/server';
import type { RequestCtx } from '../context.ts';
import { search } from '../search/search.service.ts';
import { presentSearchResults } from '../search/search.routes.ts';
import { MAX_QUERY_LENGTH } from '../search/query.ts';
import { addTool, UNTRUSTED } from './tool.ts';

// `search`: the same service call as GET /v1/search.

export function searchTools(server: McpServer, ctx: RequestCtx): void {
  addTool(server, ctx, 'search', {
    title: 'Search mail and files',
    description:
      'Searches emails (subject, sender, recipients, body, attachment names and the text inside attachments such as PDF and Word files) and files (path and text) in every mailbox you can read, best matches first. ' +
      'Syntax: words (all must match), "exact phrase", -excluded, from:, to:, subject:, filename:, has:attachment, before:YYYY-MM-DD, after:YYYY-MM-DD. ' +
      `Keep next_cursor and send it back with the same arguments for more. ${UNTRUSTED}`,
    input: {
      q: z.string().min(1).max(MAX_QUERY_LENGTH).describe('The search'),
      mailbox_id: z.string().min(1).max(100).optional().describe('Only this mailbox (bkt_… id)'),
      kind: z.enum(['email', 'file']).optional().describe('Only emails or only files'),
      limit: z.number().int().min(1).max(100).optional(),
      cursor: z.string().max(2048).optional(),
    },
    readOnly: true,
    run: async (c, a) => {
      const page = await search(c, { accountId: a.account_id, mailboxId: a.mailbox_id, q: a.q, kind: a.kind, limit: a.limit ?? 20, cursor: a.cursor });
      return { results: await presentSearchResults(c, page.items), truncated: page.truncated, pagination: page.pagination };
    },
  });
}
