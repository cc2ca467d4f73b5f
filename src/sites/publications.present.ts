import type { AppDeps } from '../context.ts';
import { hostLabel } from './urls.ts';
import { revealPassword } from './publish.service.ts';
import type { PublicationsTable } from './sites.schema.ts';

// The Publication record. The password and share text are for the owner side only (credentials
// with write access to the bucket), and only once the build is ready. `kind` is what bucket-era
// clients filter on: `bucket_bundle` for a bucket's main site, `preview` for its preview; the
// password is also under `access_password`, the name those clients read (docs/compat.md).

/** The site's address: its verified primary custom domain (main site), else its slug host. */
export function publicUrlOf(deps: AppDeps, p: Pick<PublicationsTable, 'kind' | 'public_slug'> & { site_domain?: string | null }): string {
  if (p.kind === 'main' && p.site_domain) return deps.siteDomainUrl(p.site_domain);
  return deps.siteUrl(hostLabel(p.kind, p.public_slug));
}

function shareText(url: string, p: PublicationsTable, password: string | null): string {
  const when = p.kind === 'preview' && p.expires_at ? ` (preview until ${p.expires_at})` : '';
  if (p.access_mode === 'password') return `${url}${when}\nPassword: ${password}\nSend the password separately from the link.`;
  if (p.access_mode === 'require_email') return `${url}${when}\nVisitors enter their email address and receive a one-time code to open the site.`;
  return `${url}${when}`;
}

export function presentPublication(deps: AppDeps, p: PublicationsTable, opts: { owner: boolean }) {
  const url = publicUrlOf(deps, p);
  const ready = p.publish_state === 'ready' && p.status === 'published';
  const expired = p.expires_at !== null && Date.parse(p.expires_at) <= deps.now().getTime();
  const reveal = opts.owner && ready;
  const password = reveal ? revealPassword(deps, p) : null;
  return {
    id: p.id,
    bucket_id: p.mailbox_id,
    kind: p.kind === 'main' ? 'bucket_bundle' : p.kind,
    preview: p.kind === 'preview',
    public_slug: p.public_slug,
    public_url: url,
    status: p.status,
    publish_state: p.publish_state,
    publish_pending: p.publish_state === 'queued' || p.publish_state === 'processing',
    site_mode: p.site_mode,
    site_type: 'website',
    access_mode: p.access_mode,
    noindex: p.kind === 'preview' || p.access_mode !== 'public',
    publication_root_directory: p.root_directory,
    expires_at: p.expires_at,
    expired,
    publish_enqueued_at: p.publish_enqueued_at,
    publish_started_at: p.publish_started_at,
    publish_completed_at: p.publish_completed_at,
    publish_error: p.publish_error,
    unpublished_at: p.unpublished_at,
    created_at: p.created_at,
    updated_at: p.updated_at,
    ...(reveal && p.access_mode === 'password' ? { password, access_password: password } : {}),
    ...(reveal ? { share_text: shareText(url, p, password) } : {}),
  };
}
