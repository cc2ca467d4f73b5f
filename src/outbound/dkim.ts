import fs from 'node:fs';
import { generateKeyPairSync } from 'node:crypto';
import type { AppDeps } from '../context.ts';
import { iso } from '../time.ts';
import { seal, unseal } from './seal.ts';

// DKIM keys. Two sources, looked up by the From domain at delivery time:
// - the `dkim_keys` table, one key per domain (private key sealed with the service secret), written
//   by createDkimKey() (e.g. for custom domains);
// - CUBBY_DKIM_SELECTOR + CUBBY_DKIM_PRIVATE_KEY_FILE, for the platform mail domain (CUBBY_MAIL_DOMAIN).
// Without a key, mail goes unsigned.

const PURPOSE = 'dkim-key';

export interface DkimKey {
  domainName: string;
  keySelector: string;
  privateKey: string;
}

export async function dkimKeyFor(deps: AppDeps, domain: string): Promise<DkimKey | null> {
  const d = domain.toLowerCase();
  const row = await deps.db.selectFrom('dkim_keys').selectAll().where('domain', '=', d).executeTakeFirst();
  if (row) return { domainName: d, keySelector: row.selector, privateKey: unseal(deps.secret, PURPOSE, row.sealed_private_key).toString('utf8') };
  const cfg = deps.config.outbound.dkim;
  if (cfg && d === deps.config.mailDomain) return { domainName: d, keySelector: cfg.selector, privateKey: fs.readFileSync(cfg.privateKeyFile, 'utf8') };
  return null;
}

/**
 * Generates an RSA-2048 key for a domain (replacing any earlier one) and returns the DNS TXT record
 * to publish at `<selector>._domainkey.<domain>` (`cubby admin dkim-key --domain … --selector …`).
 */
export async function createDkimKey(deps: Pick<AppDeps, 'db' | 'secret' | 'now'>, domain: string, selector: string): Promise<{ name: string; value: string }> {
  const d = domain.toLowerCase().replace(/\.$/, '');
  if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/.test(d)) throw new Error(`${domain} is not a domain name`);
  if (!/^[a-z0-9][a-z0-9._-]{0,62}$/i.test(selector)) throw new Error(`${selector} is not a DNS label`);
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const spki = publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
  const values = { selector, sealed_private_key: seal(deps.secret, PURPOSE, Buffer.from(pem)), public_key: spki, created_at: iso(deps.now()) };
  await deps.db
    .insertInto('dkim_keys')
    .values({ domain: d, ...values })
    .onConflict((oc) => oc.column('domain').doUpdateSet(values))
    .execute();
  return { name: `${selector}._domainkey.${d}`, value: `v=DKIM1; k=rsa; p=${spki}` };
}
