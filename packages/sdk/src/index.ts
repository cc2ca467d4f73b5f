// @cubby/sdk: the typed client for Cubby. Runs in Node 20+ and browsers (fetch, WebCrypto);
// Node helpers for files on disk are in '@cubby/sdk/node'.
export { Cubby, type CubbyOptions, type GitSyncOptions, type PublishOptions } from './client.ts';
export { CubbyError, WebhookVerificationError } from './errors.ts';
export { PageIterator, type Page } from './pagination.ts';
export { verifyWebhook, type HeaderBag, type VerifyOptions } from './webhooks.ts';
export type { Subscription, SubscribeOptions, LiveState, WebSocketConstructor, WebSocketLike } from './live.ts';
export type { UploadProgress, UploadFileOptions, UploadManyOptions, UploadManyResult, UploadEntry } from './uploads.ts';
export { bytesSource, guessContentType, type UploadSource, type UploadInput } from './sources.ts';
export { jsHasher, type Digests, type Hasher, type HasherFactory } from './hashing.ts';
export type { RetryOptions, FetchLike, RequestSpec } from './http.ts';
export type * from './types.ts';
export type { paths as SurfaceRPaths } from './generated/surface-r.ts';
export type { paths as SurfaceAPaths } from './generated/surface-a.ts';
