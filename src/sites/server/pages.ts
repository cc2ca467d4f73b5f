import { escapeHtml } from '../../web/html.ts';

// The few pages the sites server writes itself: not found, and the access forms of protected
// sites. Plain, self-contained HTML; every interpolated value is escaped.

const STYLE = `body{margin:0;min-height:100vh;display:grid;place-items:center;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1c2430;background:#f5f7fa}
main{background:#fff;border:1px solid #dde3ea;border-radius:12px;padding:28px;max-width:380px;width:calc(100% - 40px)}h1{font-size:20px;margin:0 0 8px}p{color:#5d6b7e;margin:0 0 16px}
label{display:block;font-weight:600;margin:12px 0 4px}input{width:100%;box-sizing:border-box;padding:9px 10px;border:1px solid #c5ced9;border-radius:6px;font:inherit}
button{margin-top:16px;width:100%;font:inherit;padding:9px;border-radius:6px;border:1px solid #2457c5;background:#2457c5;color:#fff;cursor:pointer}.error{color:#b42318;font-size:14px;margin-top:10px}`;

function page(title: string, body: string, noindex: boolean): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">${noindex ? '<meta name="robots" content="noindex">' : ''}<title>${escapeHtml(title)}</title><style>${STYLE}</style></head><body><main>${body}</main></body></html>`;
}

export function notFoundPage(noindex: boolean): string {
  return page('Not found', '<h1>Page not found</h1><p>There is nothing at this address.</p>', noindex);
}

export function noSitePage(): string {
  return page('No site here', '<h1>No site here</h1><p>No website is published at this address, or it has been taken down.</p>', true);
}

/** A custom hostname that routes to no site here: not added, or its DNS check has not passed yet. */
export function unknownHostPage(host: string): string {
  return page(
    'Domain not connected',
    `<h1>Domain not connected</h1><p>${escapeHtml(host)} points at this service, but no website answers on it: it has not been added to a site, or its DNS records have not been verified yet.</p>`,
    true,
  );
}

const errorLine = (error: string | null) => (error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : '');

export function passwordPage(next: string, error: string | null): string {
  return page(
    'Password required',
    `<h1>This site is protected</h1><p>Enter the password you were given to open it.</p>
<form method="post" action="/.cubby/password"><input type="hidden" name="next" value="${escapeHtml(next)}">
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required autofocus>
${errorLine(error)}<button type="submit">Open site</button></form>`,
    true,
  );
}

export function emailPage(next: string, error: string | null): string {
  return page(
    'Email required',
    `<h1>Confirm your email</h1><p>Enter your email address; we will send you a one-time code to open this site.</p>
<form method="post" action="/.cubby/email"><input type="hidden" name="next" value="${escapeHtml(next)}">
<label for="email">Email address</label><input id="email" name="email" type="email" autocomplete="email" required autofocus>
${errorLine(error)}<button type="submit">Send code</button></form>`,
    true,
  );
}

export function codePage(next: string, email: string, error: string | null): string {
  return page(
    'Enter your code',
    `<h1>Check your email</h1><p>We sent a six-digit code to ${escapeHtml(email)}. It expires in 10 minutes.</p>
<form method="post" action="/.cubby/code"><input type="hidden" name="next" value="${escapeHtml(next)}"><input type="hidden" name="email" value="${escapeHtml(email)}">
<label for="code">Code</label><input id="code" name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9 ]{6,8}" required autofocus>
${errorLine(error)}<button type="submit">Open site</button></form>`,
    true,
  );
}

export function tooManyPage(retryAfter: number): string {
  return page('Too many attempts', `<h1>Too many attempts</h1><p>Wait ${Math.ceil(retryAfter / 60)} minute(s), then try again.</p>`, true);
}
