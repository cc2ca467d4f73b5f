import type { Email } from 'postal-mime';
import { capUtf8, decodeUtf7 } from './parse-headers.ts';
import { boundHtmlNesting, htmlToText, sanitizeEmailHtml } from './parse-html.ts';
import type { ParseLimits } from './parse-types.ts';

/** Open elements kept when nesting (see boundHtmlNesting); real mail nests a few dozen deep. */
const MAX_HTML_DEPTH = 1000;

export interface Body {
  text: string | null;
  html: string | null;
  /** Text or HTML was cut at a cap. */
  truncated: boolean;
}

/** Line breaks as \n; NUL and other control characters (but tab and newline) removed. */
function normalizeText(s: string): string {
  return s.replace(/\r\n?/g, '\n').replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, '');
}

/**
 * body_text is the text/plain content, or text made from the HTML when there is none; the HTML is
 * cut at maxHtmlBytes before sanitizing (so the output stays well-formed) and then sanitized.
 */
export function buildBody(email: Email, limits: ParseLimits, warn: (code: string) => void, opts: { utf7?: boolean } = {}): Body {
  let truncated = false;
  // UTF-7 is ASCII, so postal-mime's windows-1252 fallback left it as it was sent: decode it now
  // (known only for a single-part message whose top-level charset is UTF-7).
  const recode = (s: string) => (opts.utf7 ? decodeUtf7(s) : s);

  let htmlIn = typeof email.html === 'string' ? recode(email.html) : '';
  const cappedHtml = capUtf8(htmlIn, limits.maxHtmlBytes);
  if (cappedHtml.cut) {
    truncated = true;
    warn('html_truncated');
  }
  const bounded = boundHtmlNesting(cappedHtml.value.replace(/\u0000/g, ''), MAX_HTML_DEPTH);
  if (bounded.changed) warn('html_nesting_repaired');
  htmlIn = bounded.html;
  const sanitized = htmlIn.trim() ? sanitizeEmailHtml(htmlIn) : '';
  const html = sanitized.trim() ? sanitized : null;

  let text = typeof email.text === 'string' ? recode(email.text) : '';
  if (!text.trim() && htmlIn.trim()) text = htmlToText(htmlIn, limits.maxTextBytes + 1);
  const cappedText = capUtf8(text, limits.maxTextBytes);
  if (cappedText.cut) {
    truncated = true;
    warn('text_truncated');
  }
  text = normalizeText(cappedText.value);
  return { text: text.trim() ? text : null, html, truncated };
}
