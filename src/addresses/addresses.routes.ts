import { z } from 'zod';
import { Deleted, okA, okR, responsesA, responsesR } from '../http/contract.ts';
import type { ErrorCode } from '../errors.ts';
import { BucketInboundEmailSettings, EmailSettings, SenderAllowlist } from './addresses.responses.ts';

const ROTATE_CODES: ErrorCode[] = [
  'MAILBOX_NOT_FOUND', 'MAILBOX_ARCHIVED', 'EMAIL_CUSTOMIZATION_UNAVAILABLE', 'EMAIL_ADDRESS_CHANGED', 'EMAIL_ADDRESS_CHANGE_PENDING', 'EMAIL_ADDRESS_TAKEN',
  'EMAIL_ALIAS_LIMIT', 'EMAIL_USERNAME_INVALID', 'EMAIL_USERNAME_RESERVED', 'EMAIL_DOMAIN_NOT_AVAILABLE', 'INBOUND_EMAIL_ROTATION_LIMIT',
];
// Surface A renames the rotation conflicts (src/addresses/rotate.service.ts).
const ROTATE_CODES_A: ErrorCode[] = [
  'MAILBOX_NOT_FOUND', 'EMAIL_CUSTOMIZATION_UNAVAILABLE', 'INBOUND_EMAIL_ADDRESS_CHANGED', 'INBOUND_EMAIL_ROTATION_UNAVAILABLE', 'INBOUND_EMAIL_ROTATION_LIMIT',
  'EMAIL_ALIAS_LIMIT', 'EMAIL_USERNAME_INVALID', 'EMAIL_USERNAME_RESERVED', 'IDEMPOTENCY_KEY_CONFLICT',
];
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { accountIdField, reasonField, writeBody } from '../http/schemas.ts';
import { idempotentCreate } from '../http/idempotency.ts';
import { invalidArgument } from '../errors.ts';
import { reasonOf, selector } from '../mailboxes/mailboxes.routes.ts';
import { loadMailbox } from '../mailboxes/mailboxes.service.ts';
import { emailSettings, inboundEmailSettings, presentAllowlist } from './settings.ts';
import { rotateAddress } from './rotate.service.ts';
import { addAlias, deleteAlias } from './aliases.service.ts';
import { updateAllowlist } from './allowlist.service.ts';
import { latestAssignment } from './addresses.repo.ts';

// Email settings of a mailbox (surface R: read, rotate, aliases, sender allowlist) and the
// surface A address rotation of a bucket.

type App = FastifyInstance<any, any, any, any, ZodTypeProvider>;

const mailboxParams = z.object({ mailbox_id: z.string().min(1).max(100).describe('bkt_… id') });
const aliasParams = mailboxParams.extend({ alias_id: z.string().min(1).max(100).describe('adr_… id of the alias') });
const readQuery = z.object({ account_id: accountIdField, reason: reasonField });
const tags = ['email settings'];

const domainField = z.string().max(253).nullable().optional().describe('An available platform domain, a ready custom domain of the account, or `platform`');
const usernameField = z.string().max(100);

const rotateBody = writeBody({
  confirm: z.boolean().optional().describe('Must be true'),
  expected_address: z.string().max(320).optional().describe('The current address; a different current address gives EMAIL_ADDRESS_CHANGED'),
  current_address: z.string().max(320).optional().describe('Accepted as expected_address (the bucket-era name); if both are sent they must agree'),
  username: usernameField.nullable().optional().describe('Omit for a generated name. Platform domain: prefix plus a new 4-character suffix; custom domain: the exact name'),
  domain: domainField,
  keep_old_as_alias: z.boolean().optional().describe('Default: true for account owners/administrators while the old domain still receives mail'),
});

const aliasBody = writeBody({
  username: usernameField.describe('Platform domain: prefix, given a 4-character random suffix; custom domain: the exact name'),
  domain: domainField,
});

const allowlistBody = writeBody({
  sender_allowlist: z
    .object({
      enabled: z.boolean(),
      entries: z.array(z.string().max(320)).max(1000).describe('Exact addresses or @domain'),
    })
    .strict(),
  expected_version: z.string().min(1).max(100).describe('sender_allowlist.version from the last read'),
});

export function registerAddressRoutesR(app: App) {
  app.get('/mailboxes/:mailbox_id/email', { schema: { operationId: 'getEmailSettings', response: responsesR({ 200: okR(EmailSettings) }, ['MAILBOX_NOT_FOUND']), tags, summary: 'Email settings: address, aliases, domains, assignment, customization, allowlist (write)', params: mailboxParams, querystring: readQuery } }, async (req) => {
    reasonOf(req);
    const loaded = await loadMailbox(req.ctx, req.query.account_id, req.params.mailbox_id, 'write');
    return { success: true, data: await emailSettings(req.ctx, loaded) };
  });

  app.post(
    '/mailboxes/:mailbox_id/email/rotate',
    { schema: { operationId: 'rotateEmailAddress', response: responsesR({ 200: okR(EmailSettings), 202: okR(EmailSettings) }, ROTATE_CODES, { write: true, describe: { 200: 'The address changed', 202: 'A custom-domain change is activating; poll assignment.status' } }), tags, summary: 'Change the address (200), or queue a custom-domain change (202; poll assignment.status)', params: mailboxParams, querystring: readQuery, body: rotateBody } },
    async (req, reply) => {
      const b = req.body;
      if (b.expected_address !== undefined && b.current_address !== undefined && b.expected_address !== b.current_address) {
        throw invalidArgument('current_address', 'differs from expected_address; send one of them');
      }
      const { loaded, pending } = await rotateAddress(req.ctx, req.params.mailbox_id, {
        accountId: selector(req),
        confirm: b.confirm,
        expectedAddress: b.expected_address ?? b.current_address,
        username: b.username,
        domain: b.domain,
        keepOldAsAlias: b.keep_old_as_alias,
        reason: reasonOf(req),
        surface: 'R',
      });
      return reply.code(pending ? 202 : 200).send({ success: true, data: await emailSettings(req.ctx, loaded) });
    },
  );

  app.post('/mailboxes/:mailbox_id/email/aliases', { schema: { operationId: 'addEmailAlias', response: responsesR({ 202: okR(EmailSettings) }, ['MAILBOX_NOT_FOUND', 'MAILBOX_ARCHIVED', 'EMAIL_CUSTOMIZATION_UNAVAILABLE', 'EMAIL_ALIAS_LIMIT', 'EMAIL_ADDRESS_TAKEN', 'EMAIL_USERNAME_INVALID', 'EMAIL_USERNAME_RESERVED', 'EMAIL_DOMAIN_NOT_AVAILABLE', 'EMAIL_ADDRESS_CHANGE_PENDING'], { write: true, describe: { 202: 'The alias is activating in the background' } }), tags, summary: 'Add an alias (202; activates in the background)', params: mailboxParams, querystring: readQuery, body: aliasBody } }, async (req, reply) => {
    const loaded = await addAlias(req.ctx, req.params.mailbox_id, { accountId: selector(req), username: req.body.username, domain: req.body.domain, reason: reasonOf(req) });
    return reply.code(202).send({ success: true, data: await emailSettings(req.ctx, loaded) });
  });

  app.delete(
    '/mailboxes/:mailbox_id/email/aliases/:alias_id',
    { schema: { operationId: 'deleteEmailAlias', response: responsesR({ 200: okR(Deleted) }, ['MAILBOX_NOT_FOUND', 'MAILBOX_ARCHIVED', 'EMAIL_ALIAS_NOT_FOUND', 'EMAIL_CUSTOMIZATION_UNAVAILABLE'], { write: true }), tags, summary: 'Delete an alias (stops deliveries to it; saved emails stay)', params: aliasParams, querystring: readQuery, body: writeBody({}).nullish() } },
    async (req) => {
      return { success: true, data: await deleteAlias(req.ctx, req.params.mailbox_id, req.params.alias_id, { accountId: selector(req), reason: reasonOf(req) }) };
    },
  );

  app.patch(
    '/mailboxes/:mailbox_id/email/allowlist',
    { schema: { operationId: 'updateSenderAllowlist', response: responsesR({ 200: okR(z.object({ sender_allowlist: SenderAllowlist })) }, ['MAILBOX_NOT_FOUND', 'MAILBOX_ARCHIVED', 'SENDER_ALLOWLIST_CONFLICT'], { write: true }), tags, summary: 'Replace the sender allowlist (owner/administrator with admin)', params: mailboxParams, querystring: readQuery, body: allowlistBody } },
    async (req) => {
      const b = req.body;
      const { mailbox, perms, access } = await updateAllowlist(req.ctx, req.params.mailbox_id, {
        accountId: selector(req),
        enabled: b.sender_allowlist.enabled,
        entries: b.sender_allowlist.entries,
        expectedVersion: b.expected_version,
        reason: reasonOf(req),
      });
      return { success: true, data: { sender_allowlist: presentAllowlist(mailbox, perms, access) } };
    },
  );
}

const rotateBodyA = writeBody({
  confirm: z.boolean().optional().describe('Must be true'),
  current_address: z.string().max(320).optional().describe('The current address'),
  domain: domainField.describe('An exact ready domain of the account, or `platform`; omitted: stay on the current domain'),
  idempotency_key: z.string().optional().describe('8 to 80 letters, digits, underscores or hyphens; reuse it when retrying'),
});

export function registerAddressRoutesA(app: App) {
  app.post(
    '/buckets/:id/inbound_email/rotate',
    {
      schema: {
        operationId: 'rotateBucketInboundEmail',
        response: responsesA({ 200: okA(BucketInboundEmailSettings), 202: okA(BucketInboundEmailSettings) }, ROTATE_CODES_A, { write: true, describe: { 200: 'The address changed', 202: 'A custom-domain activation is queued; poll inbound_email' } }),
        tags: ['buckets'],
        summary: 'Rotate the inbound address (200), or queue a custom-domain activation (202; poll inbound_email)',
        params: z.object({ id: z.string().min(1).max(100).describe('bkt_… id') }),
        querystring: z.object({ account_id: accountIdField }),
        body: rotateBodyA,
      },
    },
    async (req, reply) => {
      const b = req.body;
      const ctx = req.ctx;
      const id = req.params.id;
      if (b.confirm === undefined) throw invalidArgument('confirm', 'is required and must be true');
      const { replayed, result } = await idempotentCreate(
        ctx,
        `inbound_email.rotate:${id}`,
        b.idempotency_key,
        b,
        (record) => rotateAddress(ctx, id, { accountId: selector(req), confirm: b.confirm, expectedAddress: b.current_address, domain: b.domain, reason: reasonOf(req), surface: 'A', record }),
        async (mailboxId) => {
          const loaded = await loadMailbox(ctx, selector(req), mailboxId, 'write');
          const last = await latestAssignment(ctx.db, mailboxId);
          return { loaded, pending: last?.kind === 'primary' && last.status === 'pending' };
        },
      );
      void replayed;
      return reply.code(result.pending ? 202 : 200).send({ data: await inboundEmailSettings(ctx, result.loaded) });
    },
  );
}
