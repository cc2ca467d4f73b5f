import { z } from 'zod';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { RequestCtx } from '../context.ts';
import { accountIdField, pageQuery, reasonField } from '../http/schemas.ts';
import { named, okA, okR, Pagination, responsesA, responsesR } from '../http/contract.ts';
import { reasonOf } from '../mailboxes/mailboxes.routes.ts';
import { presentSummaries, viewerOf } from '../emails/emails.present.ts';
import { presentFiles } from '../files/files.present.ts';
import { MAX_QUERY_LENGTH } from './query.ts';
import { MAX_RANKED_MATCHES } from './search-index.ts';
import { search, type SearchHit } from './search.service.ts';

// GET /v1/search and /api/v1/search: one ranked, cursor-paged list of emails and files across every
// mailbox (bucket) the credential can read, with plain-text snippets.

type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;
const tags = ['search'];

const qField = z
  .string()
  .min(1)
  .max(MAX_QUERY_LENGTH)
  .describe('words, "phrases", -word, from:, to:, subject:, filename:, has:attachment, before:/after:YYYY-MM-DD');
const kindField = z.enum(['email', 'file']).optional().describe('Only emails or only files (default both)');

export const searchResult = named(
  'SearchResult',
  z.object({
    kind: z.enum(['email', 'file']),
    id: z.string(),
    mailbox_id: z.string(),
    score: z.number().describe('Higher is a better match; compare within one result list only'),
    snippet: z.string().nullable().describe('Plain text around the first matching word (no markup)'),
    email: z.looseObject({ id: z.string(), subject: z.string().nullable(), received_at: z.string() }).optional(),
    file: z.looseObject({ id: z.string(), path: z.string() }).optional(),
  }),
  'One search hit: an email (with its summary) or a file, its score and a plain-text snippet.',
);
const CAP = MAX_RANKED_MATCHES.toLocaleString('en-US');
const truncatedField = z
  .boolean()
  .describe(
    `True when the query matched more than ${CAP} emails (or more than ${CAP} files) in scope: only the newest ${CAP} of each were ranked, on every page. Narrow the query (more words, from:, before:/after:) to reach older matches.`,
  );
const data = z.object({ results: z.array(searchResult), truncated: truncatedField, pagination: Pagination });

/** Search hits as API objects: the email summary or file beside each, as the lists present them. */
export async function presentSearchResults(ctx: RequestCtx, hits: SearchHit[]) {
  const viewer = viewerOf(ctx);
  const emails = await presentSummaries(ctx.db, hits.flatMap((h) => (h.email ? [h.email] : [])), viewer);
  const files = await presentFiles(ctx.db, hits.flatMap((h) => (h.file ? [h.file] : [])));
  const emailById = new Map(emails.map((e) => [e.id, e]));
  const fileById = new Map(files.map((f) => [f.id, f]));
  return hits.map((h) => ({
    kind: h.kind,
    id: h.id,
    mailbox_id: h.mailboxId,
    score: -h.rank,
    snippet: h.snippet,
    ...(h.kind === 'email' ? { email: emailById.get(h.id) } : { file: fileById.get(h.id) }),
  }));
}

export function registerSearchRoutesR(app: App) {
  app.get(
    '/search',
    {
      schema: {
        tags,
        summary: 'Search emails (subject, people, body, attachment names and text) and files (path, text) in every mailbox this credential can read',
        querystring: z.object({ q: qField, mailbox_id: z.string().max(100).optional(), kind: kindField, ...pageQuery, account_id: accountIdField, reason: reasonField }),
        operationId: 'search',
        response: responsesR({ 200: okR(data) }, ['MAILBOX_NOT_FOUND']),
      },
    },
    async (req) => {
      reasonOf(req);
      const q = req.query;
      const page = await search(req.ctx, { accountId: q.account_id, mailboxId: q.mailbox_id, q: q.q, kind: q.kind, limit: q.limit, cursor: q.cursor });
      return { success: true as const, data: { results: await presentSearchResults(req.ctx, page.items), truncated: page.truncated, pagination: page.pagination } };
    },
  );
}

export function registerSearchRoutesA(app: App) {
  app.get(
    '/search',
    {
      schema: {
        tags,
        summary: 'Search emails and files in every bucket this key can read',
        querystring: z.object({ q: qField, bucket_id: z.string().max(100).optional(), kind: kindField, ...pageQuery, account_id: accountIdField }),
        operationId: 'searchBuckets',
        response: responsesA({ 200: okA(data) }, ['MAILBOX_NOT_FOUND']),
      },
    },
    async (req) => {
      const q = req.query;
      const page = await search(req.ctx, { accountId: q.account_id, mailboxId: q.bucket_id, q: q.q, kind: q.kind, limit: q.limit, cursor: q.cursor });
      return { data: { results: await presentSearchResults(req.ctx, page.items), truncated: page.truncated, pagination: page.pagination } };
    },
  );
}
