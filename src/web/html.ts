import { createHash } from 'node:crypto';
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

const STYLE = `
:root{--fg:#1c2430;--muted:#5d6b7e;--line:#dde3ea;--bg:#f5f7fa;--card:#fff;--accent:#2457c5;--danger:#b42318;--ok:#067647}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{background:var(--card);border-bottom:1px solid var(--line)}
header .bar{max-width:980px;margin:0 auto;padding:10px 20px;display:flex;align-items:center;gap:18px}
header .brand{font-weight:700;font-size:18px;color:var(--fg);text-decoration:none;margin-right:auto}
header nav{display:flex;gap:16px}
header nav a{color:var(--muted);text-decoration:none}
header nav a:hover{color:var(--accent)}
header .who{color:var(--muted);font-size:13px}
main{max-width:980px;margin:28px auto;padding:0 20px}
main.narrow{max-width:440px}
h1{font-size:24px;margin:0 0 18px}
h2{font-size:18px;margin:0 0 12px}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:22px;margin-bottom:22px}
label{display:block;font-weight:600;margin:14px 0 4px}
label .hint,.hint{font-weight:400;color:var(--muted);font-size:13px}
input[type=text],input[type=email],input[type=password],input[type=date],select{width:100%;padding:8px 10px;border:1px solid #c5ced9;border-radius:6px;font:inherit;background:#fff}
input:focus,select:focus{outline:2px solid var(--accent);outline-offset:0}
fieldset{border:1px solid var(--line);border-radius:8px;margin:14px 0 0;padding:8px 14px 12px}
legend{font-weight:600;padding:0 4px}
.choice{display:flex;gap:8px;align-items:center;font-weight:400;margin:6px 0}
button{font:inherit;padding:8px 16px;border-radius:6px;border:1px solid var(--accent);background:var(--accent);color:#fff;cursor:pointer}
button.link{background:none;border:none;color:var(--muted);padding:0}
button.danger{background:#fff;color:var(--danger);border-color:#e4a39d;padding:4px 10px;font-size:13px}
form.inline{display:inline;margin:0}
.actions{margin-top:20px}
.error{color:var(--danger);font-size:13px;margin-top:4px}
.alert{border-radius:8px;padding:12px 16px;margin-bottom:18px;border:1px solid}
.alert.bad{background:#fef3f2;border-color:#fecdca;color:var(--danger)}
.alert.good{background:#ecfdf3;border-color:#abefc6;color:var(--ok)}
.secret{display:block;font:14px ui-monospace,SFMono-Regular,Menlo,monospace;background:#0f172a;color:#e2e8f0;padding:12px 14px;border-radius:6px;word-break:break-all;user-select:all;margin:8px 0}
table{width:100%;border-collapse:collapse;font-size:14px}
th,td{text-align:left;padding:8px 6px;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--muted);font-weight:600;font-size:12px;text-transform:uppercase;letter-spacing:.03em}
code{font:13px ui-monospace,SFMono-Regular,Menlo,monospace}
h2 code{font-size:inherit}
.muted{color:var(--muted)}
.tag{display:inline-block;font-size:12px;padding:1px 8px;border-radius:999px;background:#eef2f7;color:var(--muted)}
.tag.ok{background:#ecfdf3;color:var(--ok)}
.tag.bad{background:#fef3f2;color:var(--danger)}
.mailboxes{margin-top:6px}
form:has(#access-all:checked) .mailboxes{display:none}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:0 18px}
pre.mail{white-space:pre-wrap;overflow-wrap:anywhere;font:14px/1.5 ui-monospace,SFMono-Regular,Menlo,monospace;background:#f8fafc;border:1px solid var(--line);border-radius:6px;padding:12px 14px;margin:0}
tr.unread td{font-weight:600}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px;margin:0}
dl.meta dt{color:var(--muted)}
dl.meta dd{margin:0;overflow-wrap:anywhere}
.pager{display:flex;gap:18px;margin-top:12px}
@media (max-width:700px){.grid{grid-template-columns:1fr}table{font-size:13px}}
`;

// The stylesheet is inline; the CSP allows exactly it by hash and nothing else runs.
const STYLE_HASH = createHash('sha256').update(STYLE).digest('base64');
function csp(formAction: string[] = []): string {
  return [
    "default-src 'none'",
    `style-src 'sha256-${STYLE_HASH}'`,
    "img-src 'self' data:",
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

export interface PageOptions {
  title: string;
  body: Html;
  /** Signed-in person: shows navigation and the sign-out button (needs `csrf`). */
  user?: LayoutUser | null;
  csrf?: string;
  narrow?: boolean;
}

export function layout(opts: PageOptions): Html {
  const nav = opts.user
    ? html`<nav><a href="/">Dashboard</a><a href="/settings/api_keys">API keys</a></nav>
        <span class="who">${opts.user.name} · ${opts.user.email}</span>
        <form class="inline" method="post" action="/users/sign_out"><input type="hidden" name="_csrf" value="${opts.csrf}"><button class="link" type="submit">Sign out</button></form>`
    : html`<nav><a href="/users/sign_in">Sign in</a><a href="/users/sign_up">Sign up</a></nav>`;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${opts.title} · Cubby</title>
<link rel="icon" href="data:,">
<style>${raw(STYLE)}</style>
</head>
<body>
<header><div class="bar"><a class="brand" href="/">Cubby</a>${nav}</div></header>
<main class="${opts.narrow ? 'narrow' : ''}">
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
export function messagePage(title: string, message: Html | string, link: { href: string; text: string } = { href: '/', text: 'Back to Cubby' }): Html {
  return layout({
    title,
    narrow: true,
    body: html`<div class="card"><h1>${title}</h1><p>${message}</p><p><a href="${link.href}">${link.text}</a></p></div>`,
  });
}

export function formatTime(value: string | null | undefined): Html {
  if (!value) return html`<span class="muted">—</span>`;
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return html`${value}`;
  const text = `${d.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
  return html`<time datetime="${d.toISOString()}">${text}</time>`;
}
