import { errorFromResponse } from './errors.ts';
import { Transport, type FetchLike, type RequestSpec, type TransportOptions } from './http.ts';
import { PageIterator, pageOf } from './pagination.ts';
import { jsHasher, type HasherFactory } from './hashing.ts';
import { uploadFile, uploadMany, type PutBytes, type UploadContext, type UploadEntry, type UploadFileOptions, type UploadManyOptions, type UploadManyResult } from './uploads.ts';
import type { UploadInput } from './sources.ts';
import { verifyWebhook, type HeaderBag, type VerifyOptions } from './webhooks.ts';
import { subscribe, type SubscribeOptions, type Subscription, type WebSocketConstructor } from './live.ts';
import type * as T from './types.ts';
import type { BodyOf, CallOptions, ItemOf, Out, QueryOf } from './types.ts';

// The client: one method per operation of both surfaces, grouped by resource. Mailbox-scoped
// operations take the mailbox id first. Lists return PageIterators (for await … of). Inputs use
// the field names of the API (snake_case), typed from the OpenAPI documents.

/** The transport's options (base URL, key, account, fetch, retries), plus what only the client uses. */
export interface CubbyOptions extends TransportOptions {
  /** Checksum implementation for uploads (the Node entry passes node:crypto). */
  hasher?: HasherFactory;
  /** WebSocket class for live subscriptions (default globalThis.WebSocket). */
  WebSocket?: WebSocketConstructor;
}

type MailboxesPaths = '/v1/mailboxes';
type MailboxPath = '/v1/mailboxes/{mailbox_id}';

const enc = encodeURIComponent;

function common(o: CallOptions | undefined): Record<string, unknown> {
  return { ...(o?.accountId ? { account_id: o.accountId } : {}), ...(o?.reason ? { reason: o.reason } : {}) };
}

export class Cubby {
  readonly transport: Transport;
  protected readonly hasher: HasherFactory;
  protected readonly WebSocketImpl: WebSocketConstructor | undefined;
  protected readonly fetchImpl: FetchLike;
  protected readonly sleep: (ms: number) => Promise<void>;

  constructor(opts: CubbyOptions) {
    this.transport = new Transport(opts);
    this.hasher = opts.hasher ?? jsHasher;
    this.WebSocketImpl = opts.WebSocket;
    this.fetchImpl = opts.fetch ?? ((i, init) => globalThis.fetch(i, init));
    this.sleep = opts.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
  }

  /** Escape hatch: any operation, envelope unwrapped, with the SDK's auth, account and retries. */
  request<R = unknown>(spec: RequestSpec): Promise<R> {
    return this.transport.data<R>(spec);
  }

  private get<R>(path: string, query: Record<string, unknown> | undefined, o?: CallOptions): Promise<R> {
    return this.transport.data<R>({ method: 'GET', path, query: { ...query, ...common(o) }, signal: o?.signal });
  }

  private write<R>(method: 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, body: Record<string, unknown> | undefined, o?: CallOptions & { retry?: boolean }): Promise<R> {
    if (method === 'DELETE') return this.transport.data<R>({ method, path, query: { ...body, ...common(o) }, signal: o?.signal });
    return this.transport.data<R>({ method, path, body: { ...body, ...common(o) }, retry: o?.retry, signal: o?.signal });
  }

  private list<I>(path: string, key: string, query: Record<string, unknown>, o?: CallOptions, start?: string | null, keepEmptyCursor = false): PageIterator<I> {
    return new PageIterator<I>(async (cursor) => pageOf<I>(await this.get<Record<string, unknown>>(path, { ...query, ...(cursor ? { cursor } : {}) }, o), key), start, keepEmptyCursor);
  }

  /** How the bytes of uploads are PUT; the Node entry streams files over node:http. */
  protected putBytes: PutBytes | undefined = undefined;

  private get uploadContext(): UploadContext {
    return { transport: this.transport, fetch: this.fetchImpl, hasher: this.hasher, sleep: this.sleep, putBytes: this.putBytes };
  }

  // ── account ─────────────────────────────────────────────────────────────
  /** Who and where: the account, the person, the server version, the connection. */
  status(o?: CallOptions): Promise<Out<'/v1/status', 'get', T.Status>> {
    return this.get('/v1/status', {}, o);
  }

  readonly accounts = {
    list: (q: Omit<QueryOf<'/v1/accounts', 'get'>, 'cursor'> = {}, o?: CallOptions) => this.list<T.Status['account']>('/v1/accounts', 'accounts', q, o),
    get: (accountId: string, o?: CallOptions) => this.get<{ account: T.Status['account'] }>(`/v1/accounts/${enc(accountId)}`, {}, o),
    create: (body: BodyOf<'/v1/accounts', 'post'>, o?: CallOptions) => this.write<{ account: T.Status['account'] }>('POST', '/v1/accounts', body as Record<string, unknown>, o),
    limits: (o?: CallOptions) => this.get<{ account_id: string; limits: Record<string, number | null>; usage: Record<string, unknown> }>('/v1/account/limits', {}, o),
  };

  // ── mailboxes ───────────────────────────────────────────────────────────
  readonly mailboxes = {
    list: (q: Omit<QueryOf<MailboxesPaths, 'get'>, 'cursor' | 'account_id' | 'reason'> = {}, o?: CallOptions) => this.list<ItemOf<'/v1/mailboxes', 'get', 'mailboxes', T.Mailbox>>('/v1/mailboxes', 'mailboxes', q, o),
    /** Never retried automatically (a retry could create a second mailbox). */
    create: (mailbox: { title?: string; description?: string; metadata?: Record<string, unknown>; email?: { username?: string; domain?: string } } = {}, o?: CallOptions) =>
      this.write<Out<'/v1/mailboxes', 'post', { mailbox: T.Mailbox }>>('POST', '/v1/mailboxes', { mailbox }, { ...o, retry: false }).then((d) => d.mailbox),
    get: (mailboxId: string, o?: CallOptions) => this.get<Out<MailboxPath, 'get', { mailbox: T.Mailbox }>>(`/v1/mailboxes/${enc(mailboxId)}`, {}, o).then((d) => d.mailbox),
    update: (mailboxId: string, mailbox: BodyOf<MailboxPath, 'patch'>['mailbox'], opts: CallOptions & { expectedMetadataVersion?: string } = {}) =>
      this.write<Out<MailboxPath, 'patch', { mailbox: T.Mailbox }>>('PATCH', `/v1/mailboxes/${enc(mailboxId)}`, { mailbox, ...(opts.expectedMetadataVersion ? { expected_metadata_version: opts.expectedMetadataVersion } : {}) }, opts).then((d) => d.mailbox),
    archive: (mailboxId: string, o?: CallOptions) => this.write<{ mailbox: T.Mailbox }>('POST', `/v1/mailboxes/${enc(mailboxId)}/archive`, {}, { ...o, retry: true }).then((d) => d.mailbox),
    unarchive: (mailboxId: string, o?: CallOptions) => this.write<{ mailbox: T.Mailbox }>('POST', `/v1/mailboxes/${enc(mailboxId)}/unarchive`, {}, { ...o, retry: true }).then((d) => d.mailbox),
    /** The mailbox must be archived; `confirmation` is the string the service asks for (see the error's details). */
    delete: (mailboxId: string, confirmation: string, o?: CallOptions) => this.write<Out<MailboxPath, 'delete', T.Deleted>>('DELETE', `/v1/mailboxes/${enc(mailboxId)}`, { confirmation }, o),
  };

  // ── files ───────────────────────────────────────────────────────────────
  readonly files = {
    list: (mailboxId: string, q: { q?: string; folder?: string; limit?: number } = {}, o?: CallOptions) => this.list<ItemOf<'/v1/mailboxes/{mailbox_id}/files', 'get', 'files', T.MailboxFile>>(`/v1/mailboxes/${enc(mailboxId)}/files`, 'files', q, o),
    get: (mailboxId: string, fileId: string, o?: CallOptions) => this.get<Out<'/v1/mailboxes/{mailbox_id}/files/{file_id}', 'get', { file: T.MailboxFile }>>(`/v1/mailboxes/${enc(mailboxId)}/files/${enc(fileId)}`, {}, o).then((d) => d.file),
    byPath: (mailboxId: string, path: string, o?: CallOptions) => this.get<Out<'/v1/mailboxes/{mailbox_id}/files/by_path', 'get', { file: T.MailboxFile }>>(`/v1/mailboxes/${enc(mailboxId)}/files/by_path`, { path }, o).then((d) => d.file),
    /** A signed, expiring link to the current version's bytes. */
    downloadLink: (mailboxId: string, fileId: string, o?: CallOptions) => this.get<{ download: T.DownloadLink }>(`/v1/mailboxes/${enc(mailboxId)}/files/${enc(fileId)}/download`, {}, o).then((d) => d.download),
    /** The current version's bytes. */
    read: async (mailboxId: string, fileId: string, o?: CallOptions): Promise<Uint8Array> => new Uint8Array(await (await this.fetchLink((await this.files.downloadLink(mailboxId, fileId, o)).url, o?.signal)).arrayBuffer()),
    appendText: (mailboxId: string, path: string, content: string, opts: CallOptions & { newlineBefore?: boolean; expectedMailboxVersion?: string } = {}) =>
      this.write<T.FileWrite & { appended: true; appended_bytes: number }>(
        'POST',
        `/v1/mailboxes/${enc(mailboxId)}/files/append_text`,
        { path, content, ...(opts.newlineBefore !== undefined ? { newline_before: opts.newlineBefore } : {}), ...(opts.expectedMailboxVersion ? { expected_mailbox_version: opts.expectedMailboxVersion } : {}) },
        opts,
      ),
    rename: (mailboxId: string, fileId: string, name: string, o?: CallOptions) => this.write<T.FileWrite>('POST', `/v1/mailboxes/${enc(mailboxId)}/files/${enc(fileId)}/rename`, { name }, o),
    move: (mailboxId: string, fileId: string, path: string, o?: CallOptions) => this.write<T.FileWrite>('POST', `/v1/mailboxes/${enc(mailboxId)}/files/${enc(fileId)}/move`, { path }, o),
    copy: (mailboxId: string, fileId: string, path: string, o?: CallOptions) => this.write<T.FileWrite>('POST', `/v1/mailboxes/${enc(mailboxId)}/files/${enc(fileId)}/copy`, { path }, o),
    delete: (mailboxId: string, fileId: string, o?: CallOptions) => this.write<T.Deleted>('DELETE', `/v1/mailboxes/${enc(mailboxId)}/files/${enc(fileId)}`, {}, o),
    setRead: (mailboxId: string, fileId: string, read: boolean, o?: CallOptions) => this.write<{ file: T.MailboxFile }>('PATCH', `/v1/mailboxes/${enc(mailboxId)}/files/${enc(fileId)}`, { read }, o).then((d) => d.file),
    versions: (mailboxId: string, fileId: string, q: { limit?: number } = {}, o?: CallOptions) => this.list<ItemOf<'/v1/mailboxes/{mailbox_id}/files/{file_id}/versions', 'get', 'versions', T.FileVersion>>(`/v1/mailboxes/${enc(mailboxId)}/files/${enc(fileId)}/versions`, 'versions', q, o),
    restore: (mailboxId: string, fileId: string, versionId: string, o?: CallOptions) => this.write<T.FileWrite>('POST', `/v1/mailboxes/${enc(mailboxId)}/files/${enc(fileId)}/versions/${enc(versionId)}/restore`, {}, o),
  };

  /** Uploads one file (bytes, string, Blob, stream or a source from `@cubby/sdk/node`). Identical content is skipped. */
  uploadFile(mailboxId: string, path: string, data: UploadInput, opts?: UploadFileOptions): Promise<T.FileWrite> {
    return uploadFile(this.uploadContext, mailboxId, path, data, opts);
  }

  /** Uploads many files through one upload session (batches, parallel PUTs, checksums, progress). */
  uploadMany(mailboxId: string, entries: AsyncIterable<UploadEntry> | Iterable<UploadEntry>, opts?: UploadManyOptions): Promise<UploadManyResult> {
    return uploadMany(this.uploadContext, mailboxId, entries, opts);
  }

  /** The upload steps one by one, for callers that drive them themselves. */
  readonly uploads = {
    createDirectUpload: (body: BodyOf<'/v1/direct_uploads', 'post'>, o?: CallOptions) => this.write<T.DirectUpload>('POST', '/v1/direct_uploads', body as Record<string, unknown>, { ...o, retry: true }),
    saveFile: (mailboxId: string, body: BodyOf<'/v1/mailboxes/{mailbox_id}/files', 'post'>, o?: CallOptions) => this.write<T.FileWrite>('POST', `/v1/mailboxes/${enc(mailboxId)}/files`, body as Record<string, unknown>, { ...o, retry: true }),
    startSession: (mailboxId: string, body: { delete_missing?: boolean; expected_file_count?: number; client_session_key?: string; expected_mailbox_version?: string } = {}, o?: CallOptions) =>
      this.write<T.UploadSessionResponse>('POST', `/v1/mailboxes/${enc(mailboxId)}/upload_sessions`, body, { ...o, retry: body.client_session_key !== undefined }),
    declare: (mailboxId: string, sessionId: string, files: BodyOf<'/v1/mailboxes/{mailbox_id}/upload_sessions/{session_id}/uploads', 'post'>['files'], o?: CallOptions) =>
      this.write<T.UploadSessionResponse>('POST', `/v1/mailboxes/${enc(mailboxId)}/upload_sessions/${enc(sessionId)}/uploads`, { files }, { ...o, retry: true }),
    finalizeBatch: (mailboxId: string, sessionId: string, limit?: number, o?: CallOptions) =>
      this.write<T.UploadSessionResponse>('POST', `/v1/mailboxes/${enc(mailboxId)}/upload_sessions/${enc(sessionId)}/finalize_batch`, limit === undefined ? {} : { limit }, { ...o, retry: true }),
    finalize: (mailboxId: string, sessionId: string, complete = true, o?: CallOptions) =>
      this.write<T.UploadSessionResponse>('POST', `/v1/mailboxes/${enc(mailboxId)}/upload_sessions/${enc(sessionId)}/finalize`, { complete }, { ...o, retry: true }),
  };

  // ── emails ──────────────────────────────────────────────────────────────
  readonly emails = {
    list: (mailboxId: string, q: Omit<QueryOf<'/v1/mailboxes/{mailbox_id}/emails', 'get'>, 'cursor' | 'account_id' | 'reason'> = {}, o?: CallOptions) =>
      this.list<ItemOf<'/v1/mailboxes/{mailbox_id}/emails', 'get', 'emails', T.EmailSummary>>(`/v1/mailboxes/${enc(mailboxId)}/emails`, 'emails', q, o),
    /**
     * Polling: emails oldest first from `cursor` (a saved `.cursor` of an earlier poll, or null for
     * the beginning). After iterating, save `.cursor` (it is kept on empty pages) and pass it next time
     * with the same filters.
     */
    poll: (mailboxId: string, cursor: string | null, q: Omit<QueryOf<'/v1/mailboxes/{mailbox_id}/emails', 'get'>, 'cursor' | 'order' | 'account_id' | 'reason'> = {}, o?: CallOptions) =>
      this.list<T.EmailSummary>(`/v1/mailboxes/${enc(mailboxId)}/emails`, 'emails', { ...q, order: 'asc' }, o, cursor, true),
    get: (mailboxId: string, emailId: string, o?: CallOptions) => this.get<Out<'/v1/mailboxes/{mailbox_id}/emails/{email_id}', 'get', { email: T.EmailDetail }>>(`/v1/mailboxes/${enc(mailboxId)}/emails/${enc(emailId)}`, {}, o).then((d) => d.email),
    setRead: (mailboxId: string, emailId: string, read: boolean, o?: CallOptions) => this.write<{ email: T.EmailSummary }>('PATCH', `/v1/mailboxes/${enc(mailboxId)}/emails/${enc(emailId)}`, { read }, o).then((d) => d.email),
    delete: (mailboxId: string, emailId: string, o?: CallOptions) => this.write<T.Deleted>('DELETE', `/v1/mailboxes/${enc(mailboxId)}/emails/${enc(emailId)}`, {}, o),
    /** A temporary link to the original message (.eml). */
    rawLink: (mailboxId: string, emailId: string, o?: CallOptions) => this.get<{ download: T.DownloadLink }>(`/v1/mailboxes/${enc(mailboxId)}/emails/${enc(emailId)}/raw`, {}, o).then((d) => d.download),
    raw: async (mailboxId: string, emailId: string, o?: CallOptions): Promise<Uint8Array> => new Uint8Array(await (await this.fetchLink((await this.emails.rawLink(mailboxId, emailId, o)).url, o?.signal)).arrayBuffer()),
    attachmentLink: (mailboxId: string, emailId: string, attachmentId: string, o?: CallOptions) => this.get<{ download: T.DownloadLink }>(`/v1/mailboxes/${enc(mailboxId)}/emails/${enc(emailId)}/attachments/${enc(attachmentId)}`, {}, o).then((d) => d.download),
    attachment: async (mailboxId: string, emailId: string, attachmentId: string, o?: CallOptions): Promise<Uint8Array> =>
      new Uint8Array(await (await this.fetchLink((await this.emails.attachmentLink(mailboxId, emailId, attachmentId, o)).url, o?.signal)).arrayBuffer()),
    /** Sends mail from the mailbox (202, queued). Never retried automatically. */
    send: (mailboxId: string, body: Omit<BodyOf<'/v1/mailboxes/{mailbox_id}/emails', 'post'>, 'account_id' | 'reason'>, o?: CallOptions) =>
      this.write<{ email: T.EmailSummary & { delivery?: { status: string } } }>('POST', `/v1/mailboxes/${enc(mailboxId)}/emails`, body as Record<string, unknown>, { ...o, retry: false }).then((d) => d.email),
    /** Replies to a received email: recipients and subject default from the original. */
    reply: (mailboxId: string, emailId: string, body: Omit<BodyOf<'/v1/mailboxes/{mailbox_id}/emails', 'post'>, 'in_reply_to' | 'account_id' | 'reason'>, o?: CallOptions) =>
      this.emails.send(mailboxId, { ...body, in_reply_to: emailId } as never, o),
  };

  // ── email address settings ──────────────────────────────────────────────
  readonly addresses = {
    get: (mailboxId: string, o?: CallOptions) => this.get<T.EmailSettings>(`/v1/mailboxes/${enc(mailboxId)}/email`, {}, o),
    rotate: (mailboxId: string, body: Omit<BodyOf<'/v1/mailboxes/{mailbox_id}/email/rotate', 'post'>, 'account_id' | 'reason'>, o?: CallOptions) =>
      this.write<T.EmailSettings>('POST', `/v1/mailboxes/${enc(mailboxId)}/email/rotate`, body as Record<string, unknown>, o),
    addAlias: (mailboxId: string, body: { username: string; domain?: string }, o?: CallOptions) => this.write<T.EmailSettings>('POST', `/v1/mailboxes/${enc(mailboxId)}/email/aliases`, body, o),
    removeAlias: (mailboxId: string, aliasId: string, o?: CallOptions) => this.write<T.Deleted>('DELETE', `/v1/mailboxes/${enc(mailboxId)}/email/aliases/${enc(aliasId)}`, {}, o),
    setAllowlist: (mailboxId: string, allowlist: { enabled: boolean; entries: string[] }, expectedVersion: string, o?: CallOptions) =>
      this.write<{ sender_allowlist: Record<string, unknown> }>('PATCH', `/v1/mailboxes/${enc(mailboxId)}/email/allowlist`, { sender_allowlist: allowlist, expected_version: expectedVersion }, o),
  };

  // ── webhooks ────────────────────────────────────────────────────────────
  readonly webhooks = {
    get: (mailboxId: string, o?: CallOptions) => this.get<Out<'/v1/mailboxes/{mailbox_id}/email/webhook', 'get', { webhook: T.Webhook | null }>>(`/v1/mailboxes/${enc(mailboxId)}/email/webhook`, {}, o).then((d) => d.webhook),
    /** Sets the URL; the answer has `signing_secret` once, when one was made (new URL or rotateSecret). */
    set: (mailboxId: string, url: string, opts: CallOptions & { rotateSecret?: boolean } = {}) =>
      this.write<{ webhook: T.Webhook }>('PUT', `/v1/mailboxes/${enc(mailboxId)}/email/webhook`, { webhook_url: url, ...(opts.rotateSecret ? { rotate_secret: true } : {}) }, opts).then((d) => d.webhook),
    delete: (mailboxId: string, o?: CallOptions) => this.write<T.Deleted>('DELETE', `/v1/mailboxes/${enc(mailboxId)}/email/webhook`, {}, o),
    deliveries: (mailboxId: string, q: { status?: T.WebhookDelivery['status']; limit?: number } = {}, o?: CallOptions) =>
      this.list<T.WebhookDelivery>(`/v1/mailboxes/${enc(mailboxId)}/email/webhook/deliveries`, 'deliveries', q, o),
    /**
     * Asks the service to send a signed sample event (`webhook.test`) to the webhook; the answer
     * has the event and its queued delivery, which then shows in `deliveries`.
     */
    sendTest: (mailboxId: string, o?: CallOptions) =>
      this.write<Out<'/v1/mailboxes/{mailbox_id}/email/webhook/test', 'post', { event: { id: string; type: 'webhook.test'; created_at: string }; delivery: T.WebhookDelivery }>>(
        'POST',
        `/v1/mailboxes/${enc(mailboxId)}/email/webhook/test`,
        {},
        o,
      ),
    /** Checks a delivery's signature (Standard Webhooks) and returns the event; throws WebhookVerificationError. */
    verify: (rawBody: string | Uint8Array, headers: HeaderBag, secret: string, opts?: VerifyOptions) => verifyWebhook(rawBody, headers, secret, opts),
  };

  // ── live events ─────────────────────────────────────────────────────────
  readonly live = {
    /** A one-time ticket for the WebSocket (60 s). `subscribe` takes these itself. */
    ticket: (mailboxId: string, o?: CallOptions) => this.get<{ subscription: T.LiveTicket }>(`/v1/mailboxes/${enc(mailboxId)}/email/subscription`, {}, o).then((d) => d.subscription),
    /** Calls `onEmail` for every new email, in order, exactly once, across reconnects (catch-up from the cursor). */
    subscribe: (mailboxId: string, onEmail: (email: T.EmailSummary) => void | Promise<void>, opts: SubscribeOptions = {}): Subscription =>
      subscribe(this.transport, mailboxId, onEmail, { WebSocket: this.WebSocketImpl, ...opts }),
  };

  // ── git sync (surface A; docs/git-sync.md) ──────────────────────────────
  readonly gitSync = {
    /** The connection (null when not connected) and whether the bucket can be connected. */
    get: (mailboxId: string, o?: CallOptions) => this.get<{ github_sync: T.GitSync | null; github_sync_setup: T.GitSyncSetup }>(`/api/v1/buckets/${enc(mailboxId)}/github_sync`, {}, o),
    /** Connects or changes the connection and queues a sync; `webhook_secret` is returned once, when issued. */
    connect: (mailboxId: string, body: GitSyncOptions, o?: CallOptions) =>
      this.write<{ github_sync: T.GitSync; github_sync_setup: T.GitSyncSetup; webhook_secret?: string }>('PUT', `/api/v1/buckets/${enc(mailboxId)}/github_sync`, body, o),
    /** Queues a sync now (202). */
    sync: (mailboxId: string, o?: CallOptions) => this.write<{ github_sync: T.GitSync | null; github_sync_setup: T.GitSyncSetup }>('POST', `/api/v1/buckets/${enc(mailboxId)}/github_sync/sync`, {}, o).then((d) => d.github_sync!),
    disconnect: (mailboxId: string, o?: CallOptions) => this.write<T.Deleted>('DELETE', `/api/v1/buckets/${enc(mailboxId)}/github_sync`, {}, o),
    /** Reads the connection until no sync is queued or running. */
    waitUntilSynced: async (mailboxId: string, opts: CallOptions & { intervalMs?: number; timeoutMs?: number } = {}) => {
      const deadline = Date.now() + (opts.timeoutMs ?? 300_000);
      for (;;) {
        const s = (await this.gitSync.get(mailboxId, opts)).github_sync;
        if (!s || !['queued', 'syncing'].includes(s.sync_state) || Date.now() > deadline) return s;
        await this.sleep(opts.intervalMs ?? 500);
      }
    },
  };

  // ── email domains ───────────────────────────────────────────────────────
  readonly domains = {
    list: (q: { limit?: number } = {}, o?: CallOptions) => this.list<ItemOf<'/v1/account/email_domains', 'get', 'domains', T.EmailDomain>>('/v1/account/email_domains', 'domains', q, o),
    create: (hostname: string, o?: CallOptions) => this.write<{ domain: T.EmailDomain }>('POST', '/v1/account/email_domains', { hostname }, o).then((d) => d.domain),
    check: (hostname: string, o?: CallOptions) => this.write<Record<string, unknown>>('POST', '/v1/account/email_domains/check', { hostname }, { ...o, retry: true }),
    get: (domainId: string, o?: CallOptions) => this.get<{ domain: T.EmailDomain }>(`/v1/account/email_domains/${enc(domainId)}`, {}, o).then((d) => d.domain),
    delete: (domainId: string, hostname: string, o?: CallOptions) => this.write<T.Deleted>('DELETE', `/v1/account/email_domains/${enc(domainId)}`, { hostname, confirm: 'true' }, o),
    verify: (domainId: string, o?: CallOptions) => this.write<{ domain: T.EmailDomain }>('POST', `/v1/account/email_domains/${enc(domainId)}/verify`, {}, { ...o, retry: true }).then((d) => d.domain),
  };

  // ── sites (surface A: buckets are mailboxes) ────────────────────────────
  readonly publications = {
    publish: (mailboxId: string, body: PublishOptions = {}, o?: CallOptions) => this.write<{ publication: T.Publication }>('POST', `/api/v1/buckets/${enc(mailboxId)}/publication`, body, o).then((d) => d.publication),
    preview: (mailboxId: string, body: PublishOptions = {}, o?: CallOptions) => this.write<{ publication: T.Publication }>('POST', `/api/v1/buckets/${enc(mailboxId)}/publication/preview`, body, o).then((d) => d.publication),
    forMailbox: (mailboxId: string, o?: CallOptions) => this.get<{ publication: T.Publication | null; preview: T.Publication | null }>(`/api/v1/buckets/${enc(mailboxId)}/publication`, {}, o),
    get: (publicationId: string, o?: CallOptions) => this.get<Out<'/api/v1/publications/{id}', 'get', { publication: T.Publication }>>(`/api/v1/publications/${enc(publicationId)}`, {}, o).then((d) => d.publication),
    list: (q: { bucket_id?: string; kind?: 'main' | 'preview'; limit?: number } = {}, o?: CallOptions) => this.list<ItemOf<'/api/v1/publications', 'get', 'publications', T.Publication>>('/api/v1/publications', 'publications', q, o),
    unpublish: (mailboxId: string, o?: CallOptions) => this.write<{ publication: T.Publication | null }>('DELETE', `/api/v1/buckets/${enc(mailboxId)}/publication`, {}, o),
    unpublishPreview: (mailboxId: string, o?: CallOptions) => this.write<{ publication: T.Publication | null }>('DELETE', `/api/v1/buckets/${enc(mailboxId)}/publication/preview`, {}, o),
    retry: (mailboxId: string, o?: CallOptions) => this.write<{ publication: T.Publication }>('POST', `/api/v1/buckets/${enc(mailboxId)}/publication/retry`, {}, o).then((d) => d.publication),
    renameSlug: (mailboxId: string, slug: string, o?: CallOptions) => this.write<Record<string, unknown>>('PATCH', `/api/v1/buckets/${enc(mailboxId)}/custom_domains/public_slug`, { public_slug: slug }, o),
    /** Reads the publication until its build is no longer queued or processing. */
    waitUntilSettled: async (publicationId: string, opts: CallOptions & { intervalMs?: number; timeoutMs?: number; onState?: (p: T.Publication) => void } = {}) => {
      const deadline = Date.now() + (opts.timeoutMs ?? 300_000);
      for (;;) {
        const p = await this.publications.get(publicationId, opts);
        opts.onState?.(p);
        if (!['queued', 'processing', 'unpublishing'].includes(p.publish_state)) return p;
        if (Date.now() > deadline) return p;
        await this.sleep(opts.intervalMs ?? 500);
      }
    },
  };

  protected async fetchLink(url: string, signal?: AbortSignal): Promise<Response> {
    const res = await this.fetchImpl(url, { signal });
    if (!res.ok) {
      const text = await res.text();
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      throw errorFromResponse(res.status, res.headers, body, text);
    }
    return res;
  }
}

export type GitSyncOptions = {
  repository_url: string;
  branch?: string;
  subdirectory?: string;
  /** Omit to keep the stored token; null removes it. */
  token?: string | null;
  auto_publish?: boolean;
  rotate_webhook_secret?: boolean;
};

export type PublishOptions = {
  site_mode?: 'static' | 'spa';
  access_mode?: 'public' | 'password' | 'require_email';
  password?: string;
  regenerate_password?: boolean;
  publication_root_directory?: string;
  slug_suggestions?: string[];
};
