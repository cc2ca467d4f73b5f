import fs from 'node:fs';
import https from 'node:https';
import type acmeClient from 'acme-client';
import type { AppDeps } from '../../context.ts';
import { iso } from '../../time.ts';
import { openPassword, sealPassword } from '../secrets.ts';
import { sitesChanged } from '../changes.ts';

// Certificates for verified custom domains from the ACME server at CUBBY_ACME_DIRECTORY
// (acme-client), proved with HTTP-01: the challenge answer is written to the domain's row, where
// every node's sites server finds it (server/custom-host.ts). Private keys (the ACME account's and
// each certificate's) are stored sealed with the service secret (AES-256-GCM), never in the clear.
// acme-client (with axios and node-forge, about 8 MB of heap) is loaded on first use: only servers
// with CUBBY_ACME_DIRECTORY and a verified custom domain need it.

type Acme = typeof acmeClient;
const loadAcme = async (): Promise<Acme> => (await import('acme-client')).default;

/** Certificates are renewed once they have fewer days left than this. */
export const RENEW_BEFORE_MS = 30 * 86_400_000;
let trustedCaFile: string | undefined;

function trustCa(acme: Acme, caFile: string | undefined): void {
  // acme-client talks through its own axios instance; a private directory's CA is trusted there only.
  if (!caFile || trustedCaFile === caFile) return;
  acme.axios.defaults.httpsAgent = new https.Agent({ ca: fs.readFileSync(caFile) });
  trustedCaFile = caFile;
}

async function clientFor(acme: Acme, deps: AppDeps, directoryUrl: string): Promise<{ client: acmeClient.Client; known: boolean }> {
  const row = await deps.db.selectFrom('site_acme_accounts').selectAll().where('directory_url', '=', directoryUrl).executeTakeFirst();
  if (row) return { client: new acme.Client({ directoryUrl, accountKey: openPassword(deps.secret, row.key_sealed), accountUrl: row.account_url ?? undefined }), known: row.account_url !== null };
  const key = (await acme.crypto.createPrivateEcdsaKey()).toString();
  await deps.db
    .insertInto('site_acme_accounts')
    .values({ directory_url: directoryUrl, key_sealed: sealPassword(deps.secret, key), account_url: null, created_at: iso(deps.now()) })
    .onConflict((oc) => oc.column('directory_url').doNothing())
    .execute();
  // Another node may have created it first: use whichever key was stored.
  return clientFor(acme, deps, directoryUrl);
}

/** Obtains (or renews) the certificate of a verified domain. Errors are recorded, then rethrown for the job's retry. */
export async function issueCertificate(deps: AppDeps, domainId: string): Promise<void> {
  const cfg = deps.config.siteDomains.acme;
  if (!cfg) return;
  const d = await deps.db.selectFrom('site_domains').selectAll().where('id', '=', domainId).executeTakeFirst();
  if (!d || d.status !== 'verified') return;
  if (d.cert_status === 'issued' && d.cert_expires_at && Date.parse(d.cert_expires_at) - deps.now().getTime() > RENEW_BEFORE_MS) return;
  const set = (patch: Record<string, unknown>) => deps.db.updateTable('site_domains').set({ ...patch, updated_at: iso(deps.now()) }).where('id', '=', d.id).execute();
  await set({ cert_status: d.cert_status === 'issued' ? 'issued' : 'pending', cert_attempted_at: iso(deps.now()) });
  try {
    const acme = await loadAcme();
    trustCa(acme, cfg.caFile);
    const { client, known } = await clientFor(acme, deps, cfg.directoryUrl);
    const [key, csr] = await acme.crypto.createCsr({ commonName: d.hostname, altNames: [d.hostname] }, await acme.crypto.createPrivateEcdsaKey());
    const cert = await client.auto({
      csr,
      email: cfg.email,
      termsOfServiceAgreed: true,
      challengePriority: ['http-01'],
      // acme-client would fetch the challenge from port 80 itself first; the ACME server does that.
      skipChallengeVerification: true,
      challengeCreateFn: async (_authz, challenge, keyAuthorization) => {
        await set({ acme_token: challenge.token, acme_key_authorization: keyAuthorization });
      },
      challengeRemoveFn: async () => {
        await set({ acme_token: null, acme_key_authorization: null });
      },
    });
    if (!known) await deps.db.updateTable('site_acme_accounts').set({ account_url: client.getAccountUrl() }).where('directory_url', '=', cfg.directoryUrl).execute();
    const info = acme.crypto.readCertificateInfo(cert);
    await set({ cert_status: 'issued', cert_pem: cert, cert_key_sealed: sealPassword(deps.secret, key.toString()), cert_expires_at: iso(info.notAfter), cert_error: null });
    sitesChanged(deps.db);
  } catch (err) {
    const message = err instanceof Error ? err.message.slice(0, 500) : 'certificate request failed';
    await set({ cert_status: d.cert_status === 'issued' ? 'issued' : 'failed', cert_error: message, acme_token: null, acme_key_authorization: null });
    throw err;
  }
}

/** The certificate and key of a verified domain, for the TLS listener's SNI lookup. */
export async function certificateFor(deps: AppDeps, hostname: string): Promise<{ cert: string; key: string } | null> {
  const d = await deps.db.selectFrom('site_domains').select(['cert_pem', 'cert_key_sealed']).where('verified_key', '=', hostname).where('cert_status', '=', 'issued').executeTakeFirst();
  if (!d?.cert_pem || !d.cert_key_sealed) return null;
  return { cert: d.cert_pem, key: openPassword(deps.secret, d.cert_key_sealed) };
}
