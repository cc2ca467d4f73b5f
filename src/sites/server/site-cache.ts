import type { AppDeps } from '../../context.ts';
import type { AccessMode, HomeKind, PublicationKind, SiteMode } from '../sites.schema.ts';
import { onSitesChanged } from '../changes.ts';
import { isHashedAsset } from '../build/content-types.ts';
import { readBlob } from '../build/generate.ts';

// What the sites server keeps in memory, all of it safe to lose:
// - host label or custom hostname → the publication it serves (1 s time to live; changes made in this process drop it
//   at once, other nodes' changes show within the TTL);
// - bundle id → its manifest (bundles never change, so no expiry; bounded by count);
// - blob sha256 → bytes, for small blobs (content-addressed, so never stale; bounded by bytes).

const HOST_TTL_MS = 1000;
const MAX_HOSTS = 10_000;
const MAX_BUNDLES = 256;
/** Blobs up to this size are kept in memory once read; larger ones are streamed every time. */
export const MEMORY_BLOB_MAX = 1024 * 1024;
const MEMORY_TOTAL = 128 * 1024 * 1024;

export interface Variant {
  sha256: string;
  size: number;
  etag: string;
}

export interface FileEntry {
  path: string;
  type: string;
  identity: Variant;
  gzip: Variant | null;
  br: Variant | null;
  viewer: Variant | null;
  hashed: boolean;
}

export interface Bundle {
  id: string;
  homeKind: HomeKind;
  entryPath: string;
  files: Map<string, FileEntry>;
}

export interface Site {
  publicationId: string;
  kind: PublicationKind;
  siteMode: SiteMode;
  accessMode: AccessMode;
  accessEpoch: number;
  expiresAt: number | null;
  noindex: boolean;
  /** The verified primary custom domain: requests on any other host of the site redirect there. */
  canonicalHost: string | null;
  /** A custom domain with an ACME certificate: plain HTTP redirects to https. */
  httpsOnly: boolean;
  bundle: Bundle;
}

const etagOf = (sha256: string) => `"${sha256.slice(0, 40)}"`;

export class SiteCache {
  private hosts = new Map<string, { site: Site | null; at: number }>();
  private pending = new Map<string, Promise<Site | null>>();
  private bundles = new Map<string, Bundle>();
  private blobs = new Map<string, Buffer>();
  private blobBytes = 0;
  private generation = 0;
  private readonly unsubscribe: () => void;

  constructor(private readonly deps: AppDeps) {
    this.unsubscribe = onSitesChanged(deps.db, () => {
      this.generation++;
      this.hosts.clear();
    });
  }

  close(): void {
    this.unsubscribe();
  }

  /** The site a host label serves, from memory when fresh (synchronous on the hot path). */
  peek(label: string): Site | null | undefined {
    const hit = this.hosts.get(label);
    if (hit && Date.now() - hit.at < HOST_TTL_MS) return hit.site;
    return undefined;
  }

  resolve(label: string): Promise<Site | null> {
    let p = this.pending.get(label);
    if (!p) {
      const generation = this.generation;
      p = this.load(label).then(
        (site) => {
          this.pending.delete(label);
          // A change committed while loading may have made this answer stale: do not keep it.
          if (generation === this.generation) {
            if (this.hosts.size >= MAX_HOSTS) this.hosts.clear();
            this.hosts.set(label, { site, at: Date.now() });
          }
          return site;
        },
        (err) => {
          this.pending.delete(label);
          throw err;
        },
      );
      this.pending.set(label, p);
    }
    return p;
  }

  /**
   * `key` is a host label of ours (`docs`, `preview-docs`) or a custom hostname (it holds a dot):
   * only a verified custom domain routes to a site, and only to the main site of its own bucket.
   */
  private async load(key: string): Promise<Site | null> {
    const custom = key.includes('.');
    const kind: PublicationKind = !custom && key.startsWith('preview-') ? 'preview' : 'main';
    let q = this.deps.db
      .selectFrom('publications')
      .innerJoin('mailboxes', 'mailboxes.id', 'publications.mailbox_id')
      .innerJoin('accounts', 'accounts.id', 'publications.account_id')
      .select(['publications.id', 'publications.site_mode', 'publications.access_mode', 'publications.access_epoch', 'publications.expires_at', 'publications.bundle_id', 'publications.site_domain'])
      .where('publications.kind', '=', kind)
      .where('publications.status', '=', 'published')
      .where('publications.bundle_id', 'is not', null)
      .where('mailboxes.archived_at', 'is', null)
      .where('mailboxes.deleted_at', 'is', null)
      // An operator switching publishing off takes the account's sites down too.
      .where('accounts.website_publishing_enabled', '=', 1)
      .where('accounts.suspended_at', 'is', null);
    if (custom) {
      q = q.innerJoin('site_domains', 'site_domains.mailbox_id', 'publications.mailbox_id').where('site_domains.verified_key', '=', key);
    } else {
      q = q.where('publications.public_slug', '=', kind === 'preview' ? key.slice('preview-'.length) : key);
    }
    const row = await q.executeTakeFirst();
    if (!row?.bundle_id) return null;
    const https = custom && this.deps.config.siteDomains.acme !== null && (await this.deps.db.selectFrom('site_domains').select('cert_status').where('verified_key', '=', key).executeTakeFirst())?.cert_status === 'issued';
    const bundle = await this.bundle(row.bundle_id);
    if (!bundle) return null;
    return {
      publicationId: row.id,
      kind,
      siteMode: row.site_mode,
      accessMode: row.access_mode,
      accessEpoch: Number(row.access_epoch),
      expiresAt: row.expires_at ? Date.parse(row.expires_at) : null,
      noindex: kind === 'preview' || row.access_mode !== 'public',
      canonicalHost: kind === 'main' ? row.site_domain : null,
      httpsOnly: https,
      bundle,
    };
  }

  private async bundle(id: string): Promise<Bundle | null> {
    const cached = this.bundles.get(id);
    if (cached) return cached;
    const b = await this.deps.db.selectFrom('site_bundles').select(['id', 'home_kind', 'entry_path']).where('id', '=', id).executeTakeFirst();
    if (!b) return null;
    const rows = await this.deps.db.selectFrom('site_files').selectAll().where('bundle_id', '=', id).execute();
    const files = new Map<string, FileEntry>();
    const v = (sha: string | null, size: number | string | null): Variant | null => (sha ? { sha256: sha, size: Number(size), etag: etagOf(sha) } : null);
    for (const r of rows) {
      files.set(r.path, {
        path: r.path,
        type: r.content_type,
        identity: v(r.sha256, r.byte_size)!,
        gzip: v(r.gzip_sha256, r.gzip_size),
        br: v(r.br_sha256, r.br_size),
        viewer: v(r.viewer_sha256, r.viewer_size),
        hashed: isHashedAsset(r.path),
      });
    }
    const bundle: Bundle = { id, homeKind: b.home_kind, entryPath: b.entry_path, files };
    if (this.bundles.size >= MAX_BUNDLES) this.bundles.delete(this.bundles.keys().next().value!);
    this.bundles.set(id, bundle);
    return bundle;
  }

  /** Small blobs' bytes from memory, read once; null for blobs that are streamed instead. */
  memoryBlob(v: Variant): Buffer | undefined {
    return this.blobs.get(v.sha256);
  }

  async loadBlob(v: Variant): Promise<Buffer> {
    const hit = this.blobs.get(v.sha256);
    if (hit) return hit;
    const bytes = await readBlob(this.deps, v.sha256, v.size);
    while (this.blobBytes + bytes.length > MEMORY_TOTAL && this.blobs.size) {
      const [oldest, buf] = this.blobs.entries().next().value!;
      this.blobs.delete(oldest);
      this.blobBytes -= buf.length;
    }
    this.blobs.set(v.sha256, bytes);
    this.blobBytes += bytes.length;
    return bytes;
  }
}
