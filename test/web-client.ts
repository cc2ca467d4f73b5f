// A tiny cookie-keeping HTTP client for the dashboard's server-rendered pages.
// It follows no redirects, so tests see each 303 and its Location.
import http from 'node:http';

let loopback = 0;
function nextLoopback(): string {
  loopback += 1;
  return `127.${100 + (process.pid % 100)}.${Math.floor(loopback / 250) % 250}.${(loopback % 250) + 2}`;
}

function send(url: URL, localAddress: string, method: string, headers: Record<string, string>, body?: string | Buffer) {
  return new Promise<{ status: number; headers: Headers; text: string; bytes: Buffer }>((resolve, reject) => {
    const req = http.request(url, { method, headers, localAddress }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const h = new Headers();
        for (let i = 0; i < res.rawHeaders.length; i += 2) h.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
        const bytes = Buffer.concat(chunks);
        resolve({ status: res.statusCode!, headers: h, text: bytes.toString('utf8'), bytes });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

export interface PageResponse {
  status: number;
  headers: Headers;
  text: string;
  location: string | null;
  setCookies: string[];
  /** The body as received (for images and other binary answers). */
  bytes: Buffer;
}

export class WebClient {
  readonly cookies = new Map<string, string>();

  /**
   * Each client connects from its own loopback address (Linux routes all of 127/8 to lo),
   * so that per-IP limits see separate people; pass an address to share one.
   */
  constructor(
    readonly base: string,
    readonly ip = nextLoopback(),
  ) {}

  private cookieHeader(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  private remember(headers: Headers): string[] {
    const list = headers.getSetCookie();
    for (const line of list) {
      const [pair, ...attrs] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      const expired = attrs.some((a) => /^\s*expires=/i.test(a) && Date.parse(a.split('=')[1]!) <= Date.now()) || attrs.some((a) => /^\s*max-age=0\s*$/i.test(a));
      if (expired || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return list;
  }

  /** A list value sends the field once per item (checkboxes). */
  async request(method: string, path: string, form?: Record<string, string | string[]>, headers: Record<string, string> = {}): Promise<PageResponse> {
    const body = form ? new URLSearchParams(Object.entries(form).flatMap(([k, v]) => (Array.isArray(v) ? v.map((x) => [k, x]) : [[k, v]]))).toString() : undefined;
    const res = await send(new URL(path, this.base), this.ip, method, {
      ...(this.cookies.size ? { cookie: this.cookieHeader() } : {}),
      ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      ...headers,
    }, body);
    const setCookies = this.remember(res.headers);
    return { ...res, location: res.headers.get('location'), setCookies };
  }

  get(path: string): Promise<PageResponse> {
    return this.request('GET', path);
  }

  /** POSTs a form with the CSRF token taken from `page` (or from a fresh GET of `from`). */
  async submit(from: string | PageResponse, action: string, fields: Record<string, string>): Promise<PageResponse> {
    const page = typeof from === 'string' ? await this.get(from) : from;
    return this.request('POST', action, { _csrf: csrfOf(page.text), ...fields });
  }

  /**
   * POSTs a multipart/form-data form (as a browser sends a form with a file input), with the CSRF
   * token taken from `from`. `file` is omitted when null.
   */
  async submitMultipart(from: string | PageResponse, action: string, fields: Record<string, string>, file: { field: string; filename: string; contentType: string; bytes: Buffer } | null): Promise<PageResponse> {
    const page = typeof from === 'string' ? await this.get(from) : from;
    const boundary = `----cubbytest${Math.random().toString(36).slice(2)}`;
    const parts: Buffer[] = [];
    for (const [name, value] of Object.entries({ _csrf: csrfOf(page.text), ...fields })) {
      parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`));
    }
    if (file) {
      parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${file.field}"; filename="${file.filename}"\r\nContent-Type: ${file.contentType}\r\n\r\n`), file.bytes, Buffer.from('\r\n'));
    }
    parts.push(Buffer.from(`--${boundary}--\r\n`));
    const res = await send(new URL(action, this.base), this.ip, 'POST', { cookie: this.cookieHeader(), 'content-type': `multipart/form-data; boundary=${boundary}` }, Buffer.concat(parts));
    const setCookies = this.remember(res.headers);
    return { ...res, location: res.headers.get('location'), setCookies };
  }

  async signUp(fields: { email: string; name?: string; password?: string; account_name?: string }): Promise<PageResponse> {
    return this.submit('/users/sign_up', '/users/sign_up', { name: 'Web Person', password: 'a long test password', ...fields });
  }

  async signIn(email: string, password: string): Promise<PageResponse> {
    return this.submit('/users/sign_in', '/users/sign_in', { email, password });
  }
}

export function csrfOf(html: string): string {
  const m = html.match(/name="_csrf" value="([^"]+)"/);
  if (!m) throw new Error('no CSRF token on the page');
  return m[1]!;
}
