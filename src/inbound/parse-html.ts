import { Parser } from 'htmlparser2';
import sanitizeHtml from 'sanitize-html';

// HTML bodies are untrusted. The sanitized HTML keeps formatting only:
// - a fixed allowlist of formatting and table tags; no script, style element, iframe, object,
//   embed, form controls, meta, link, base, svg or math (their text content is dropped too);
// - no event handlers, ids or classes; `style` only with an allowlist of properties whose values
//   cannot load anything (no url(), no expression(), no position);
// - links: http, https and mailto only, opened in a new tab with rel="noopener noreferrer nofollow";
// - images: `cid:` (the message's own parts) and `data:` raster images only; remote images (tracking
//   pixels) are removed, not proxied.
// Whoever shows it should still put it in a sandboxed iframe with a restrictive CSP.

const LENGTH = /^(?:-?\d{1,5}(?:\.\d{1,4})?(?:px|em|rem|%|pt)?|auto|0)(?:\s+(?:-?\d{1,5}(?:\.\d{1,4})?(?:px|em|rem|%|pt)?|auto|0)){0,3}$/i;
const COLOR = /^(?:#[0-9a-f]{3,8}|rgba?\(\s*[\d.%\s,]{1,40}\)|[a-z]{3,20})$/i;
const BORDER = /^(?:none|0|(?:\d{1,3}(?:px)?\s+)?(?:solid|dashed|dotted|double|none)(?:\s+(?:#[0-9a-f]{3,8}|[a-z]{3,20}))?)$/i;

const STYLES: Record<string, RegExp[]> = {
  color: [COLOR], 'background-color': [COLOR],
  'text-align': [/^(?:left|right|center|justify|start|end)$/i],
  'vertical-align': [/^(?:top|middle|bottom|baseline)$/i],
  'font-size': [LENGTH, /^(?:small|medium|large|x-small|x-large|smaller|larger)$/i],
  'font-weight': [/^(?:normal|bold|bolder|lighter|\d00)$/i],
  'font-style': [/^(?:normal|italic|oblique)$/i],
  'font-family': [/^[\w\s,'"-]{1,200}$/],
  'text-decoration': [/^(?:none|underline|line-through|overline)$/i],
  'line-height': [LENGTH, /^\d(?:\.\d+)?$/],
  'white-space': [/^(?:normal|nowrap|pre|pre-wrap|pre-line)$/i],
  'border-collapse': [/^(?:collapse|separate)$/i],
  border: [BORDER], 'border-top': [BORDER], 'border-bottom': [BORDER], 'border-left': [BORDER], 'border-right': [BORDER],
  width: [LENGTH], height: [LENGTH], 'max-width': [LENGTH], 'min-width': [LENGTH],
  margin: [LENGTH], 'margin-top': [LENGTH], 'margin-bottom': [LENGTH], 'margin-left': [LENGTH], 'margin-right': [LENGTH],
  padding: [LENGTH], 'padding-top': [LENGTH], 'padding-bottom': [LENGTH], 'padding-left': [LENGTH], 'padding-right': [LENGTH],
};

const RASTER_DATA_URL = /^data:image\/(?:png|gif|jpe?g|webp|bmp);base64,[a-z0-9+/=\s]+$/i;
const DROPPED_WITH_CONTENT = ['script', 'style', 'textarea', 'option', 'select', 'title', 'noscript', 'template', 'svg', 'math', 'iframe', 'object', 'head', 'xmp', 'noembed', 'noframes'];

export const SANITIZE_OPTIONS: sanitizeHtml.IOptions = {
  allowedTags: [
    'a', 'abbr', 'address', 'b', 'bdi', 'bdo', 'big', 'blockquote', 'br', 'caption', 'center', 'cite', 'code', 'col', 'colgroup',
    'dd', 'del', 'dfn', 'div', 'dl', 'dt', 'em', 'figcaption', 'figure', 'font', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'hr', 'i',
    'img', 'ins', 'kbd', 'li', 'mark', 'ol', 'p', 'pre', 'q', 's', 'samp', 'small', 'span', 'strike', 'strong', 'sub', 'sup',
    'table', 'tbody', 'td', 'tfoot', 'th', 'thead', 'time', 'tr', 'tt', 'u', 'ul', 'var', 'wbr',
    'article', 'aside', 'footer', 'header', 'main', 'nav', 'section', 'summary', 'details',
  ],
  allowedAttributes: {
    '*': ['style', 'title', 'dir', 'lang', 'align'],
    a: ['href', 'name', 'target', 'rel'],
    img: ['src', 'alt', 'width', 'height'],
    font: ['color', 'face', 'size'],
    table: ['width', 'border', 'cellpadding', 'cellspacing', 'bgcolor'],
    td: ['colspan', 'rowspan', 'width', 'height', 'valign', 'bgcolor', 'nowrap'],
    th: ['colspan', 'rowspan', 'width', 'height', 'valign', 'bgcolor', 'nowrap', 'scope'],
    tr: ['valign', 'bgcolor'], col: ['span', 'width'], colgroup: ['span', 'width'],
    ol: ['start', 'type'], ul: ['type'], li: ['value'], time: ['datetime'],
  },
  allowedSchemes: ['http', 'https', 'mailto'],
  allowedSchemesByTag: { img: ['cid', 'data'] },
  allowedSchemesAppliedToAttributes: ['href', 'src', 'cite'],
  allowProtocolRelative: false,
  allowedStyles: { '*': STYLES },
  parseStyleAttributes: true,
  disallowedTagsMode: 'discard',
  nonTextTags: DROPPED_WITH_CONTENT,
  enforceHtmlBoundary: false,
  nestingLimit: 200,
  transformTags: {
    a: (tagName, attribs) => ({ tagName, attribs: { ...attribs, target: '_blank', rel: 'noopener noreferrer nofollow' } }),
    img: (tagName, attribs) => {
      const src = (attribs.src ?? '').trim();
      const ok = /^cid:/i.test(src) || RASTER_DATA_URL.test(src);
      const { src: _drop, ...rest } = attribs;
      return { tagName, attribs: ok ? { ...rest, src } : rest };
    },
  },
  // An image without an allowed source (remote, svg, javascript:) is removed entirely.
  exclusiveFilter: (frame) => frame.tag === 'img' && !frame.attribs.src,
};

const VOID = new Set(['area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'param', 'source', 'track', 'wbr', 'keygen', 'basefont', 'frame', 'isindex']);
const AUTO_CLOSING = new Set(['p', 'li', 'td', 'th', 'tr', 'dt', 'dd', 'option', 'optgroup', 'thead', 'tbody', 'tfoot', 'colgroup', 'caption']);
// A tag, bounded: it stops at the next `<` so that a run of unclosed `<a` stays linear.
const TAG = /<(\/?)([a-zA-Z][a-zA-Z0-9:-]{0,63})(?:[\s/][^<>]{0,4000})?>/g;

/**
 * htmlparser2 (under sanitize-html too) keeps its open-element stack with unshift/shift and
 * searches it for every end tag, so deep nesting and unmatched end tags cost O(depth²): 40,000
 * nested <div>s took 3 s. Before parsing, tags opened deeper than `maxDepth` are dropped with their
 * end tags, and end tags that close nothing are dropped. Linear; returns the input when nothing is dropped.
 */
export function boundHtmlNesting(html: string, maxDepth: number): { html: string; changed: boolean } {
  const open = new Map<string, number>();
  const dropped = new Map<string, number>();
  let depth = 0;
  let changed = false;
  const out = html.replace(TAG, (tag: string, slash: string, rawName: string) => {
    const name = rawName.toLowerCase();
    if (!slash) {
      if (VOID.has(name) || tag.endsWith('/>')) return tag;
      // A second <p>, <li>, <td>… closes the open one (HTML's implied end tags), so it adds no depth.
      if (AUTO_CLOSING.has(name) && (open.get(name) ?? 0) > 0) return tag;
      if (depth >= maxDepth) {
        dropped.set(name, (dropped.get(name) ?? 0) + 1);
        changed = true;
        return '';
      }
      open.set(name, (open.get(name) ?? 0) + 1);
      depth++;
      return tag;
    }
    const d = dropped.get(name) ?? 0;
    if (d > 0) {
      dropped.set(name, d - 1);
      return '';
    }
    const o = open.get(name) ?? 0;
    if (o > 0) {
      open.set(name, o - 1);
      depth--;
      return tag;
    }
    if (VOID.has(name)) return tag;
    changed = true;
    return '';
  });
  return changed ? { html: out, changed } : { html, changed };
}

export function sanitizeEmailHtml(html: string): string {
  return sanitizeHtml(html, SANITIZE_OPTIONS);
}

const BLOCK = new Set(['p', 'div', 'tr', 'table', 'ul', 'ol', 'blockquote', 'pre', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'hr', 'section', 'article', 'header', 'footer', 'dl', 'dt', 'dd', 'address', 'center', 'figure', 'caption']);
const SKIP = new Set(['script', 'style', 'head', 'title', 'noscript', 'template', 'svg', 'math', 'textarea', 'select', 'option', 'iframe', 'object']);

/** Plain text from HTML, for messages that have no text part: block tags become line breaks. */
export function htmlToText(html: string, maxChars: number): string {
  const out: string[] = [];
  let length = 0;
  let skipDepth = 0;
  let preDepth = 0;
  const push = (s: string) => {
    if (length < maxChars) {
      out.push(s);
      length += s.length;
    }
  };
  const parser = new Parser({
    onopentag(name) {
      if (SKIP.has(name)) skipDepth++;
      else if (name === 'pre') preDepth++;
      if (name === 'br') push('\n');
      else if (name === 'li') push('\n- ');
      else if (name === 'td' || name === 'th') push(' ');
      else if (BLOCK.has(name)) push('\n\n');
    },
    onclosetag(name) {
      if (SKIP.has(name)) skipDepth = Math.max(0, skipDepth - 1);
      else if (name === 'pre') preDepth = Math.max(0, preDepth - 1);
      if (BLOCK.has(name)) push('\n\n');
    },
    ontext(text) {
      if (skipDepth > 0) return;
      push(preDepth > 0 ? text : text.replace(/\s+/g, ' '));
    },
  }, { decodeEntities: true });
  parser.write(html);
  parser.end();
  return out.join('')
    .replace(/[ \t\u00a0]+\n/g, '\n')
    .replace(/\n[ \t\u00a0]+/g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}
