import MarkdownIt from 'markdown-it';
import { escapeHtml } from '../../web/html.ts';
import { viewerKind, isHtmlPath } from './content-types.ts';

// Pages the build generates for auto-index sites: folder listings (with a README or index.md
// rendered below) and viewer pages for images, PDFs, text and Markdown. User text is escaped;
// Markdown is rendered with raw HTML off (markdown-it html:false also refuses javascript: links).

const md = new MarkdownIt({ html: false, linkify: true, typographer: false });

export function renderMarkdown(text: string): string {
  return md.render(text);
}

/** The macros of an auto-index template; whitespace inside the braces is allowed. */
export const MACROS = ['title', 'description', 'files', 'theme_switch', 'account_name', 'account_logo'] as const;
export type Macros = Record<(typeof MACROS)[number], string>;
const FILES_MACRO = /\{\{\s*files\s*\}\}/;

export function templateHasFiles(template: string): boolean {
  return FILES_MACRO.test(template);
}

/** Fills every known macro (values are HTML already); unknown `{{…}}` stay as written. */
export function applyTemplate(template: string, values: Macros): string {
  return template.replace(/\{\{\s*([a-z_]+)\s*\}\}/g, (all, name: string) => ((MACROS as readonly string[]).includes(name) ? values[name as keyof Macros] : all));
}

const THEME_SWITCH = `<button type="button" class="theme-switch" aria-label="Switch light or dark theme" onclick="(function(){var d=document.documentElement,t=d.dataset.theme==='dark'?'light':'dark';d.dataset.theme=t;try{localStorage.setItem('cubby-theme',t)}catch(e){}})()">◐</button><script>try{var t=localStorage.getItem('cubby-theme');if(t)document.documentElement.dataset.theme=t}catch(e){}</script>`;

const STYLE = `:root{--fg:#1c2430;--muted:#5d6b7e;--line:#dde3ea;--bg:#f7f8fa;--card:#fff;--accent:#2457c5}
[data-theme=dark]{--fg:#e6e9ee;--muted:#9aa6b6;--line:#2c3542;--bg:#11161d;--card:#18202a;--accent:#7aa2ff}
*{box-sizing:border-box}body{margin:0;font:15px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:960px;margin:32px auto;padding:0 20px}header.site{display:flex;align-items:center;gap:12px;margin-bottom:18px}
header.site h1{font-size:24px;margin:0;flex:1}.account-logo{display:inline-grid;place-items:center;width:32px;height:32px;border-radius:8px;background:var(--accent);color:#fff;font-weight:700}
img.account-logo{background:none;object-fit:contain}
.theme-switch{font:inherit;background:none;border:1px solid var(--line);color:var(--fg);border-radius:6px;padding:2px 8px;cursor:pointer}
.description{color:var(--muted);margin:-8px 0 18px}.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:18px;margin-bottom:20px;overflow:auto}
table{width:100%;border-collapse:collapse;font-size:14px}th,td{text-align:left;padding:7px 6px;border-bottom:1px solid var(--line)}th{color:var(--muted);font-weight:600;font-size:12px;text-transform:uppercase}
td.size{text-align:right;color:var(--muted);white-space:nowrap}a{color:var(--accent)}pre{white-space:pre-wrap;word-break:break-word;font:13px/1.5 ui-monospace,Menlo,monospace}
img.view{max-width:100%;height:auto;display:block;margin:auto}iframe.view{width:100%;height:80vh;border:0}.readme img{max-width:100%}footer{color:var(--muted);font-size:12px;margin-top:24px}`;

export const DEFAULT_TEMPLATE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{title}}</title><style>${STYLE}</style></head>
<body><main><header class="site">{{account_logo}}<h1>{{title}}</h1>{{theme_switch}}</header>
<p class="description">{{description}}</p>
{{files}}
<footer>{{account_name}}</footer></main></body></html>
`;

export interface PageContext {
  title: string;
  description: string;
  accountName: string;
  /** The account's logo as the bundle serves it (src/accounts/logo.service.ts), or null: the initial. */
  logo: { path: string; sha256: string; size: number; contentType: string } | null;
  template: string;
}

function macros(ctx: PageContext, title: string, files: string): Macros {
  const initial = (ctx.accountName.trim()[0] ?? '?').toUpperCase();
  return {
    title: escapeHtml(title),
    description: escapeHtml(ctx.description),
    files,
    theme_switch: THEME_SWITCH,
    account_name: escapeHtml(ctx.accountName),
    // An absolute path: every page of the site, at any depth, names the one file at the site root.
    account_logo: ctx.logo
      ? `<img class="account-logo" src="/${encodePath(ctx.logo.path)}" alt="${escapeHtml(ctx.accountName)}">`
      : `<span class="account-logo" aria-hidden="true">${escapeHtml(initial)}</span>`,
  };
}

export function encodePath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}

function humanSize(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  if (n < 1024 ** 3) return `${(n / 1024 / 1024).toFixed(1)} MB`;
  return `${(n / 1024 ** 3).toFixed(1)} GB`;
}

export interface ListingEntry {
  name: string;
  folder: boolean;
  size: number;
}

export interface Readme {
  name: string;
  text: string;
}

/** The listing of one folder (`folder` is '' for the site root), with its README below. */
export function listingPage(ctx: PageContext, folder: string, entries: ListingEntry[], readme: Readme | null): string {
  const rows: string[] = [];
  if (folder) rows.push(`<tr><td><a href="../">../</a></td><td class="size"></td></tr>`);
  const sorted = [...entries].sort((a, b) => (a.folder !== b.folder ? (a.folder ? -1 : 1) : a.name.localeCompare(b.name)));
  for (const e of sorted) {
    const href = e.folder ? `${encodeURIComponent(e.name)}/` : !isHtmlPath(e.name) && viewerKind(e.name) ? `${encodeURIComponent(e.name)}?view` : encodeURIComponent(e.name);
    rows.push(`<tr><td><a href="${escapeHtml(href)}">${escapeHtml(e.name)}${e.folder ? '/' : ''}</a></td><td class="size">${e.folder ? '' : humanSize(e.size)}</td></tr>`);
  }
  let files = `<div class="card files"><table><thead><tr><th>Name</th><th class="size">Size</th></tr></thead><tbody>${rows.join('')}</tbody></table></div>`;
  if (readme) {
    const body = /\.(md|markdown)$/i.test(readme.name) ? renderMarkdown(readme.text) : `<pre>${escapeHtml(readme.text)}</pre>`;
    files += `<article class="card readme" data-source="${escapeHtml(readme.name)}">${body}</article>`;
  }
  const title = folder ? `${ctx.title} — ${folder}/` : ctx.title;
  return applyTemplate(ctx.template, macros(ctx, title, files));
}

/** The viewer page of one file, at `<file>?view`. `text` is its content for text and Markdown. */
export function viewerPage(ctx: PageContext, path: string, text: string | null): string {
  const name = path.slice(path.lastIndexOf('/') + 1);
  const src = escapeHtml(encodeURIComponent(name));
  const kind = viewerKind(path);
  let body: string;
  if (kind === 'image') body = `<img class="view" src="${src}" alt="${escapeHtml(name)}">`;
  else if (kind === 'pdf') body = `<iframe class="view" src="${src}" title="${escapeHtml(name)}"></iframe>`;
  else if (text === null) body = `<p>This file is too large to show here.</p>`;
  else if (kind === 'markdown') body = `<div class="readme">${renderMarkdown(text)}</div>`;
  else body = `<pre>${escapeHtml(text)}</pre>`;
  const files = `<p><a href="./">← All files</a> · <a href="${src}" download>Download ${escapeHtml(name)}</a></p><div class="card viewer" data-kind="${kind}">${body}</div>`;
  return applyTemplate(DEFAULT_TEMPLATE, macros(ctx, `${name} — ${ctx.title}`, files));
}
