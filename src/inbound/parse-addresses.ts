import { addressParser } from 'postal-mime';
import { allFields, cleanLine, decodeRaw, firstField, recodeUtf7Words, type HeaderBlock } from './parse-headers.ts';
import type { EmailAddress, ParseLimits } from './parse-types.ts';

// Address fields: parsed with postal-mime's address parser (groups flattened, RFC 2047 names
// decoded), then validated here: postal-mime hands back entries such as `{address: ''}` for a bare
// display name and `moderator` for a local part without a domain, which are dropped.

const MAX_NAME_CHARS = 256;
// RFC 5322 atext and dots, plus UTF-8 (RFC 6531). Consecutive or trailing dots occur in real mail and are kept.
const LOCAL_ATOM = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.\u0080-\uffff-]{1,128}$/;
const LOCAL_QUOTED = /^"[^"\\\u0000-\u001f\u007f]{0,126}"$/;
const DOMAIN_LABEL = /^(?!-)[a-z0-9\u00a1-\uffff-]{1,63}(?<!-)$/;
const DOMAIN_LITERAL = /^\[(?:\d{1,3}(?:\.\d{1,3}){3}|ipv6:[0-9a-f:.]{2,45})\]$/;

/** A valid address with its domain lower-cased (and NFC), or null. */
export function normalizeAddress(raw: string): string | null {
  if (typeof raw !== 'string') return null;
  const address = raw.trim();
  // No whitespace of any kind (NBSP, U+2000…) and no control, format or unassigned characters.
  if (address.length > 320 || /[\s\p{C}]/u.test(address)) return null;
  const at = address.lastIndexOf('@');
  if (at <= 0 || at === address.length - 1) return null;
  const local = address.slice(0, at);
  const domain = address.slice(at + 1).normalize('NFC').toLowerCase();
  if (!LOCAL_ATOM.test(local) && !LOCAL_QUOTED.test(local)) return null;
  if (domain.length > 253) return null;
  if (!DOMAIN_LITERAL.test(domain) && !domain.split('.').every((label) => DOMAIN_LABEL.test(label))) return null;
  return `${local}@${domain}`;
}

function cleanName(name: unknown): string | null {
  if (typeof name !== 'string') return null;
  const n = cleanLine(name).replace(/^["']+|["']+$/g, '').trim().slice(0, MAX_NAME_CHARS);
  return n === '' ? null : n;
}

/** Every valid address of the given header fields, in header order, groups flattened, capped. */
export function addressesOf(
  block: HeaderBlock,
  lower: string,
  limits: ParseLimits,
  fallback: TextDecoder | null,
  warn: (code: string) => void,
  opts: { firstFieldOnly?: boolean } = {},
): EmailAddress[] {
  const fields = opts.firstFieldOnly ? [firstField(block, lower)].filter((f) => f !== undefined) : allFields(block, lower);
  const out: EmailAddress[] = [];
  const code = lower.replace('-', '_');
  for (const field of fields) {
    if (field.cut) warn(`${code}_truncated`);
    let parsed: { address?: string; name?: string }[];
    try {
      parsed = addressParser(recodeUtf7Words(decodeRaw(field.raw, fallback)), { flatten: true });
    } catch {
      warn(`${code}_unparseable`);
      continue;
    }
    for (const entry of parsed) {
      const address = normalizeAddress(entry.address ?? '');
      if (!address) {
        warn(`${code}_invalid_address_dropped`);
        continue;
      }
      if (out.length >= limits.maxAddressesPerField) {
        warn(`${code}_truncated`);
        return out;
      }
      out.push({ address, name: cleanName(entry.name) });
    }
  }
  return out;
}
