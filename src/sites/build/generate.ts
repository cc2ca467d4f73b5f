import { promisify } from 'node:util';
import { brotliCompress, constants as zlibConstants, gzip } from 'node:zlib';
import type { AppDeps } from '../../context.ts';
import { iso } from '../../time.ts';
import { contentTypeFor, isCompressible, isHtmlPath, viewerKind } from './content-types.ts';
import { BuildError, type Plan, type SourceFile } from './plan.ts';
import { DEFAULT_TEMPLATE, listingPage, templateHasFiles, viewerPage, type ListingEntry, type PageContext, type Readme } from './pages.ts';
import type { SiteFilesTable } from '../sites.schema.ts';

// Step two: the manifest rows. Served files point at the blobs the bucket already has (no bytes
// are copied); generated pages and the gzip/brotli variants are written as new blobs once, here,
// so that the sites server never compresses anything per request.

const gzipAsync = promisify(gzip);
const brotliAsync = promisify(brotliCompress);

/** Text shown in viewer pages and READMEs is capped; bigger files get a download link. */
const MAX_INLINE_TEXT = 512 * 1024;
/** A variant is kept only if it saves at least this share of the bytes. */
const MIN_SAVING = 0.05;

export type Entry = Omit<SiteFilesTable, 'bundle_id'>;

export interface Generated {
  entries: Entry[];
  /** Blobs this build wrote (generated pages, variants): recorded in `blobs` for garbage collection. */
  newBlobs: { sha256: string; byte_size: number; md5: string }[];
}

export async function readBlob(deps: AppDeps, sha256: string, size: number): Promise<Buffer> {
  if (size === 0) return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  for await (const chunk of await deps.blobs.read(sha256)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function generateEntries(deps: AppDeps, plan: Plan, page: Omit<PageContext, 'template'>): Promise<Generated> {
  const newBlobs: Generated['newBlobs'] = [];
  const store = async (bytes: Buffer) => {
    const stored = await deps.blobs.putBuffer(bytes);
    newBlobs.push({ sha256: stored.sha256, byte_size: stored.byteSize, md5: stored.md5Base64 });
    return stored;
  };
  const variants = new Map<string, Pick<Entry, 'gzip_sha256' | 'gzip_size' | 'br_sha256' | 'br_size'>>();
  const compress = async (path: string, sha256: string, size: number, bytes?: Buffer) => {
    const none = { gzip_sha256: null, gzip_size: null, br_sha256: null, br_size: null };
    if (!isCompressible(path, size)) return none;
    const known = variants.get(sha256) ?? (await previousVariants(deps, sha256));
    if (known) return known;
    const raw = bytes ?? (await readBlob(deps, sha256, size));
    const [gz, br] = await Promise.all([
      gzipAsync(raw, { level: 9 }),
      brotliAsync(raw, { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: raw.length <= 1024 * 1024 ? 11 : 6, [zlibConstants.BROTLI_PARAM_SIZE_HINT]: raw.length } }),
    ]);
    const worth = (b: Buffer) => b.length <= raw.length * (1 - MIN_SAVING);
    const out = { ...none };
    if (worth(gz)) Object.assign(out, { gzip_sha256: (await store(gz)).sha256, gzip_size: gz.length });
    if (worth(br)) Object.assign(out, { br_sha256: (await store(br)).sha256, br_size: br.length });
    variants.set(sha256, out);
    return out;
  };

  const entries: Entry[] = [];
  for (const f of plan.files) {
    entries.push({ path: f.path, sha256: f.sha256, byte_size: f.size, content_type: contentTypeFor(f.path, f.storedType), generated: 0, ...(await compress(f.path, f.sha256, f.size)), viewer_sha256: null, viewer_size: null });
  }
  if (plan.homeKind !== 'auto') return { entries, newBlobs };

  let template = DEFAULT_TEMPLATE;
  if (plan.template) {
    template = (await readBlob(deps, plan.template.sha256, plan.template.size)).toString('utf8');
    if (!templateHasFiles(template)) throw new BuildError('index.template.html must contain {{files}}.');
  }
  const ctx: PageContext = { ...page, template };
  // The logo is served from the site's own origin, under .cubby/ (never a user path: excluded).
  if (page.logo) {
    entries.push({ path: page.logo.path, sha256: page.logo.sha256, byte_size: page.logo.size, content_type: page.logo.contentType, generated: 1, gzip_sha256: null, gzip_size: null, br_sha256: null, br_size: null, viewer_sha256: null, viewer_size: null });
  }
  const byPath = new Map(entries.map((e) => [e.path, e]));
  const readText = async (f: SourceFile) => (f.size <= MAX_INLINE_TEXT ? (await readBlob(deps, f.sha256, f.size)).toString('utf8') : null);

  // Viewer pages for supported non-HTML files.
  for (const f of plan.files) {
    const kind = viewerKind(f.path);
    if (!kind || isHtmlPath(f.path)) continue;
    const text = kind === 'text' || kind === 'markdown' ? await readText(f) : null;
    const bytes = Buffer.from(viewerPage(ctx, f.path, text));
    const stored = await store(bytes);
    Object.assign(byPath.get(f.path)!, { viewer_sha256: stored.sha256, viewer_size: stored.byteSize });
  }

  // A listing for every folder without its own index page.
  const folders = new Map<string, ListingEntry[]>([['', []]]);
  for (const f of plan.files) {
    const parts = f.path.split('/');
    for (let i = 0; i < parts.length - 1; i++) {
      const parent = parts.slice(0, i).join('/');
      const folder = parts.slice(0, i + 1).join('/');
      if (!folders.has(folder)) {
        folders.set(folder, []);
        folders.get(parent)!.push({ name: parts[i]!, folder: true, size: 0 });
      }
    }
    folders.get(parts.slice(0, -1).join('/'))!.push({ name: parts.at(-1)!, folder: false, size: f.size });
  }
  for (const [folder, list] of folders) {
    const prefix = folder ? `${folder}/` : '';
    if (byPath.has(`${prefix}index.html`) || byPath.has(`${prefix}index.htm`)) continue;
    const readmeFile = findReadme(plan.files, prefix);
    const readme: Readme | null = readmeFile ? { name: readmeFile.path.slice(prefix.length), text: (await readText(readmeFile)) ?? '(too large to show here)' } : null;
    const bytes = Buffer.from(listingPage(ctx, folder, list, readme));
    const stored = await store(bytes);
    const path = `${prefix}index.html`;
    const entry: Entry = { path, sha256: stored.sha256, byte_size: stored.byteSize, content_type: 'text/html; charset=utf-8', generated: 1, ...(await compress(path, stored.sha256, stored.byteSize, bytes)), viewer_sha256: null, viewer_size: null };
    entries.push(entry);
    byPath.set(path, entry);
  }
  return { entries, newBlobs };
}

const README_ORDER = ['index.md', 'readme.md', 'readme.markdown', 'readme.txt', 'readme'];

/** index.md first, then README in its usual spellings, case-insensitively. */
function findReadme(files: SourceFile[], prefix: string): SourceFile | null {
  const here = files.filter((f) => f.path.startsWith(prefix) && !f.path.slice(prefix.length).includes('/'));
  for (const name of README_ORDER) {
    const hit = here.find((f) => f.path.slice(prefix.length).toLowerCase() === name);
    if (hit) return hit;
  }
  return null;
}

/** Variants made by an earlier build for the same bytes (they are content-addressed too). */
async function previousVariants(deps: AppDeps, sha256: string) {
  const row = await deps.db
    .selectFrom('site_files')
    .select(['gzip_sha256', 'gzip_size', 'br_sha256', 'br_size'])
    .where('sha256', '=', sha256)
    .where('generated', '=', 0)
    .where((eb) => eb.or([eb('gzip_sha256', 'is not', null), eb('br_sha256', 'is not', null)]))
    .limit(1)
    .executeTakeFirst();
  if (!row) return null;
  for (const s of [row.gzip_sha256, row.br_sha256]) if (s && !(await deps.blobs.exists(s))) return null;
  return { gzip_sha256: row.gzip_sha256, gzip_size: row.gzip_size === null ? null : Number(row.gzip_size), br_sha256: row.br_sha256, br_size: row.br_size === null ? null : Number(row.br_size) };
}

export function blobRow(b: Generated['newBlobs'][number], now: Date) {
  return { sha256: b.sha256, byte_size: b.byte_size, md5: b.md5, created_at: iso(now) };
}
