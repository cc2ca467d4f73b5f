import type { BlobStore } from '../src/blobs/blob-store.ts';
import { FsBlobStore } from '../src/blobs/fs-store.ts';
import { InlineAwareBlobStore } from '../src/blobs/inline-blobs.ts';

/** The directory of the app's fs store (deps.blobs is the store behind the inline-blob reader). */
export function fsStoreRoot(blobs: BlobStore): string {
  const store = blobs instanceof InlineAwareBlobStore ? blobs.store : blobs;
  if (!(store instanceof FsBlobStore)) throw new Error(`the app's blob store is ${store.kind}, not fs`);
  return store.root;
}
