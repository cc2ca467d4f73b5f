import { assetUrl, type AssetName } from './assets.ts';
import type { FastifyReply } from 'fastify';

// Escaped HTML templates. Every interpolated value is escaped unless it is already an
// `Html` (the result of another `html` template or of `raw`); arrays are concatenated.

export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"'`]/g, (c) => ESCAPES[c]!);
}

/** Trusted markup, passed through unescaped. Only for constants written in our code. */
export function raw(value: string): Html {
  return new Html(value);
}

function render(value: unknown): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Html) return value.value;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1]!;
  return new Html(out);
}

// The stylesheet and the script are files of our own origin (src/web/assets, served by
// assets.ts); the CSP allows exactly 'self' for both, so no inline script or style can run.
function csp(formAction: string[] = []): string {
  return [
    "default-src 'none'",
    "style-src 'self'",
    "script-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "media-src 'self'",
    "frame-src 'self'",
    ["form-action 'self'", ...formAction].join(' '),
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

/**
 * The CSP source a form on our page must be allowed to reach when its POST answers with a
 * redirect there (browsers apply form-action to the redirect too): the origin of an http(s)
 * URI, the scheme of a private-use one (`cursor:`), or null when it cannot be spelled safely.
 */
export function formActionSource(uri: string): string | null {
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    return null;
  }
  if (u.protocol === 'http:' || u.protocol === 'https:') {
    // CSP host sources cannot name an IPv6 literal; the scheme is the narrowest that works.
    if (u.hostname.startsWith('[')) return u.protocol;
    return /^https?:\/\/[a-z0-9.-]+(:\d+)?$/.test(u.origin) ? u.origin : null;
  }
  return /^[a-z][a-z0-9+.-]*:$/.test(u.protocol) ? u.protocol : null;
}

export interface LayoutUser {
  name: string;
  email: string;
}

/** Sections of the navigation bar; `active` marks the current one. */
export type NavSection = 'mailboxes' | 'connections' | 'keys' | 'account';

export interface PageOptions {
  title: string;
  body: Html;
  /** Signed-in person: shows navigation and the sign-out button (needs `csrf`). */
  user?: LayoutUser | null;
  csrf?: string;
  narrow?: boolean;
  active?: NavSection;
  /** Extra stylesheets and scripts of this page (same origin, loaded after the app's own). */
  assets?: AssetName[];
}

const SECTIONS: { id: NavSection; href: string; text: string }[] = [
  { id: 'mailboxes', href: '/', text: 'Mailboxes' },
  { id: 'connections', href: '/settings/connections', text: 'Connections' },
  { id: 'keys', href: '/settings/api_keys', text: 'API keys' },
  { id: 'account', href: '/account', text: 'Account' },
];

export function layout(opts: PageOptions): Html {
  const nav = opts.user
    ? html`<nav aria-label="Main">${SECTIONS.map((s) => html`<a href="${s.href}"${opts.active === s.id ? html` aria-current="page"` : ''}>${s.text}</a>`)}</nav>
        <div class="who"><span>${opts.user.name}</span>
        ${opts.csrf ? html`<form class="inline" method="post" action="/users/sign_out"><input type="hidden" name="_csrf" value="${opts.csrf}"><button class="link" type="submit">Sign out</button></form>` : ''}</div>`
    : html`<nav aria-label="Main"><a href="/users/sign_in">Sign in</a><a href="/users/sign_up">Sign up</a></nav>`;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<meta name="color-scheme" content="light dark">
<title>${opts.title} · Cubby</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${assetUrl('app.css')}">
<script src="${assetUrl('app.js')}" defer></script>
${(opts.assets ?? []).map((a) => (a.endsWith('.css') ? html`<link rel="stylesheet" href="${assetUrl(a)}">
` : html`<script src="${assetUrl(a)}" defer></script>
`))}</head>
<body${opts.csrf ? html` data-csrf="${opts.csrf}"` : ''}>
<a class="skip" href="#main">Skip to content</a>
<header class="top"><div class="bar"><a class="brand" href="/"><span class="logo" aria-hidden="true"></span>Cubby</a>${nav}</div></header>
<main id="main" class="${opts.narrow ? 'narrow' : ''}">
${opts.body}
</main>
</body>
</html>`;
}

/**
 * Sends a page with headers that keep it out of caches and frames. `formAction` adds sources
 * (from formActionSource) that the page's forms may be redirected to.
 */
export function sendPage(reply: FastifyReply, status: number, page: Html, opts: { formAction?: string[] } = {}): FastifyReply {
  return reply
    .code(status)
    .header('content-type', 'text/html; charset=utf-8')
    .header('content-security-policy', csp(opts.formAction))
    .header('cache-control', 'no-store')
    .header('x-frame-options', 'DENY')
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'same-origin')
    .send(page.value);
}

/** A small page for refusals and errors. */
export function messagePage(
  title: string,
  message: Html | string,
  link: { href: string; text: string } = { href: '/', text: 'Back to Cubby' },
  opts: { user?: LayoutUser | null; csrf?: string; status?: number } = {},
): Html {
  return layout({
    title,
    narrow: true,
    user: opts.user,
    csrf: opts.csrf,
    body: html`<div class="card">${opts.status ? html`<p class="muted small">Error ${opts.status}</p>` : ''}<h1>${title}</h1><p>${message}</p><p><a class="button secondary" href="${link.href}">${link.text}</a></p></div>`,
  });
}

export function formatTime(value: string | null | undefined): Html {
  if (!value) return html`<span class="muted">—</span>`;
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return html`${value}`;
  const text = `${d.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
  return html`<time datetime="${d.toISOString()}">${text}</time>`;
}
