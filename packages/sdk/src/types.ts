import type { paths as SurfaceR } from './generated/surface-r.ts';
import type { paths as SurfaceA } from './generated/surface-a.ts';
import type { components as ComponentsR } from './generated/surface-r.ts';
import type { components as ComponentsA } from './generated/surface-a.ts';

// Inputs and outputs of every operation come from the types generated from the service's own
// OpenAPI documents (src/generated, `npm run generate`). Where a document does not describe a
// response yet, the hand-written shape below is used instead; once it does, the generated type
// wins (`Out<…>`), so regenerating only ever tightens the types.

export type Paths = SurfaceR & SurfaceA;
export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';
type Op<P extends keyof Paths, M extends Method> = NonNullable<Paths[P][M & keyof Paths[P]]>;

/** The JSON request body of an operation. */
export type BodyOf<P extends keyof Paths, M extends Method> =
  Op<P, M> extends { requestBody?: { content: { 'application/json': infer B } } } ? B : Record<string, never>;

/** The query parameters of an operation (booleans may be given as booleans: they are sent as text). */
export type QueryOf<P extends keyof Paths, M extends Method> = Op<P, M> extends { parameters: { query?: infer Q } } ? Loose<NonNullable<Q>> : Record<string, never>;
type Loose<Q> = { [K in keyof Q]?: Q[K] extends infer V ? (V extends 'true' | 'false' | '0' | '1' ? V | boolean : V) : never };

type SuccessJson<R> = { [S in keyof R]: S extends 200 | 201 | 202 ? (R[S] extends { content: { 'application/json': infer J } } ? J : never) : never }[keyof R];
type Unwrapped<J> = J extends { data: infer D } ? D : J;

/** The unwrapped `data` of an operation's success answer, or `Fallback` while the document has no schema for it. */
export type Out<P extends keyof Paths, M extends Method, Fallback> = [SuccessJson<Op<P, M> extends { responses: infer R } ? R : never>] extends [never]
  ? Fallback
  : Unwrapped<SuccessJson<Op<P, M> extends { responses: infer R } ? R : never>>;

/** One item of a documented list (`key` of the answer), or `Fallback` while the answer is undocumented. */
export type ItemOf<P extends keyof Paths, M extends Method, K extends string, Fallback> =
  Out<P, M, { [k in K]: Fallback[] }> extends { [k in K]: (infer I)[] } ? I : Fallback;

/** Options every call takes: another granted account for this request, and the reason recorded in the activity log. */
export interface CallOptions {
  accountId?: string;
  reason?: string;
  signal?: AbortSignal;
}


type Open = { [key: string]: unknown };












export interface UploadSessionResponse extends Open {
  mailbox_upload_session: UploadSession;
  uploads: { input_index: number; path: string; upload: UploadTarget }[];
  skipped: { input_index: number; path: string; reason: string }[];
  uploaded_count: number;
  skipped_count: number;
  finalize_pending: boolean;
  remaining_files_count: number;
}




export interface LiveTicket {
  token: string;
  expires_in: number;
  channel: string;
  account_id: string;
  mailbox_id: string;
  websocket_url: string;
}







// The main objects, as the service's OpenAPI documents name them (components.schemas).
export type Pagination = ComponentsR['schemas']['Pagination'];
export type Mailbox = ComponentsR['schemas']['Mailbox'];
export type FileVersion = ComponentsR['schemas']['FileVersion'];
export type MailboxFile = ComponentsR['schemas']['MailboxFile'];
export type FileWrite = ComponentsR['schemas']['FileWrite'];
export type EmailAddress = ComponentsR['schemas']['EmailAddress'];
export type EmailSummary = ComponentsR['schemas']['EmailSummary'];
export type EmailAttachment = ComponentsR['schemas']['EmailAttachment'];
export type EmailDetail = ComponentsR['schemas']['EmailDetail'];
export type DownloadLink = ComponentsR['schemas']['DownloadLink'];
export type UploadTarget = ComponentsR['schemas']['UploadTarget'];
export type UploadSession = ComponentsR['schemas']['UploadSession'];
export type DirectUpload = ComponentsR['schemas']['DirectUpload'];
export type Webhook = ComponentsR['schemas']['Webhook'];
export type WebhookDelivery = ComponentsR['schemas']['WebhookDelivery'];
export type EmailSettings = ComponentsR['schemas']['EmailSettings'];
export type EmailDomain = ComponentsR['schemas']['EmailDomain'];
export type Status = ComponentsR['schemas']['Status'];
export type Deleted = ComponentsR['schemas']['Deleted'];
export type EmailReceivedEvent = ComponentsR['schemas']['EmailReceivedEvent'];
export type Publication = ComponentsA['schemas']['Publication'];
export type GitSync = ComponentsA['schemas']['GitSync'];
export type GitSyncSetup = ComponentsA['schemas']['GitSyncSetup'];
