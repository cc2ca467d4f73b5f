import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserSuiteTitle, HAVE_CHROMIUM, openChromium } from './browser.ts';
import { DATABASES, type TestApp } from './harness.ts';
import { sendMail } from './smtp-helpers.ts';
import { makeCert, Receiver, startHookApp, type TestCert } from './webhook-receiver.ts';
import { expectAccessible, narrowPage, overflowsSideways, shoot, signIn } from './workspace-helpers.ts';
import { activateAssignment } from '../src/addresses/activation.ts';
import { newId } from '../src/ids.ts';

// Mailbox settings in Chromium against a real HTTPS webhook receiver: the signing secret is shown
// once, a test event and a received email are delivered signed and show in the delivery log with
// their attempts, and the live event viewer shows the email.received event as it happens. A new
// alias waiting for activation shows as pending and the card updates by itself when it settles.

const TITLE = browserSuiteTitle('mailbox settings in a browser');

describe.skipIf(!HAVE_CHROMIUM)(TITLE, () => {
  for (const kind of DATABASES) {
    describe(`settings [${kind}]`, () => {
      let cert: TestCert;
      let receiver: Receiver;
      let app: TestApp;
      let browser: Awaited<ReturnType<typeof openChromium>>;

      beforeAll(async () => {
        cert = await makeCert();
        receiver = new Receiver(cert);
        await receiver.start();
        ({ app } = await startHookApp(kind, cert));
        browser = await openChromium();
      });
      afterAll(async () => {
        await browser?.close();
        await app?.stop();
        await receiver?.stop();
        fs.rmSync(cert.dir, { recursive: true, force: true });
      });

      it('sets a webhook, shows its secret once, delivers a test event and mail, and shows events live', { timeout: 120_000 }, async () => {
        const base = app.base;
        const user = await app.user({ name: 'Hook Owner' });
        const page = await browser.context.newPage();
        page.setDefaultTimeout(15_000);
        try {
          await signIn(page, base, user.email);
          await page.goto(`${base}/mailboxes/new`);
          await page.getByRole('textbox', { name: /^Title/ }).fill('Orders');
          await Promise.all([page.waitForURL(/done=created$/), page.getByRole('button', { name: 'Create mailbox' }).click()]);
          const box = new URL(page.url()).pathname;
          const address = (await page.locator('.addr code').first().textContent())!.trim();
          await page.getByRole('link', { name: 'Settings', exact: true }).click();
          await page.waitForURL(`${base}${box}/settings`);

          await page.getByLabel('Webhook URL').fill(receiver.url('/orders'));
          await page.getByRole('button', { name: 'Set webhook' }).click();
          const secret = (await page.getByTestId('webhook-secret').textContent())!.trim();
          expect(secret).toMatch(/^whsec_/);
          receiver.secret = secret;
          await shoot(page, `settings-secret-${kind}`);
          await page.goto(`${base}${box}/settings`);
          expect(await page.content()).not.toContain(secret);

          await page.getByRole('button', { name: 'Send test event' }).click();
          await receiver.waitFor(1);
          expect(receiver.received[0]!.verified).toBe(true);
          expect(receiver.received[0]!.json).toMatchObject({ type: 'webhook.test' });

          // The live viewer shows a received email's event; the webhook gets it too.
          await page.locator('[data-live-events][data-live-state=open]').waitFor();
          const sent = await sendMail(app, { to: address, subject: 'Order 42', text: 'One crate' });
          expect(sent.rejected).toEqual([]);
          await page.locator('[data-live-events]', { hasText: 'email.received' }).waitFor();
          await receiver.waitFor(2);
          await expect.poll(async () => {
            await page.goto(`${base}${box}/settings`);
            return page.getByTestId('deliveries').locator('li', { hasText: 'succeeded' }).count();
          }).toBe(2);
          await expect(page.getByTestId('deliveries').textContent()).resolves.toMatch(/Attempt 1: 20\d/);
          await expectAccessible(page);
          await shoot(page, `settings-${kind}`);

          // Title and allowlist through the same services as the API.
          await page.getByLabel('Title').fill('Orders desk');
          await page.getByRole('button', { name: 'Save', exact: true }).click();
          await expect(page.getByRole('heading', { name: 'Orders desk' }).isVisible()).resolves.toBe(true);
          await page.getByLabel('Only accept mail from the list').check();
          await page.getByLabel(/^Entries/).fill('@example.com');
          await page.getByRole('button', { name: 'Save allowlist' }).click();
          await expect(page.getByRole('status').first().textContent()).resolves.toContain('Allowlist saved');

          const narrow = await narrowPage(browser.context);
          try {
            await narrow.goto(`${base}${box}/settings`);
            expect(await overflowsSideways(narrow)).toMatchObject({ overflow: false });
            await shoot(narrow, `narrow-settings-${kind}`);
          } finally {
            await narrow.close();
          }
        } finally {
          await page.close();
        }
      });

      it('shows an alias waiting for activation and updates the card by itself when it becomes active or fails', { timeout: 90_000 }, async () => {
        const base = app.base;
        const user = await app.user({ name: 'Alias Owner', plan: 'paid' });
        const page = await browser.context.newPage();
        page.setDefaultTimeout(15_000);
        const db = app.started.deps.db;
        // The state an alias add leaves before its activation job has run (the job is run by the test).
        const pending = async (mailboxId: string, username: string, localPart: string, hostname: string) => {
          const id = newId('asg');
          const now = new Date().toISOString();
          const address = `${localPart}@${hostname}`;
          await db
            .insertInto('address_assignments')
            .values({ id, mailbox_id: mailboxId, account_id: user.accountId, kind: 'alias', status: 'pending', hostname, local_part: localPart, username, address, reserve_key: address, old_address: null, keep_old_as_alias: 0, error: null, created_by_user_id: user.userId, created_by_api_key_id: null, created_at: now, updated_at: now, finished_at: null })
            .execute();
          return id;
        };
        try {
          await signIn(page, base, user.email);
          await page.goto(`${base}/mailboxes/new`);
          await page.getByRole('textbox', { name: /^Title/ }).fill('Sales');
          await Promise.all([page.waitForURL(/done=created$/), page.getByRole('button', { name: 'Create mailbox' }).click()]);
          const box = new URL(page.url()).pathname;
          const mailboxId = box.split('/').pop()!;
          const primary = (await page.locator('.addr code').first().textContent())!.trim();
          const [primaryLocal, domain] = primary.split('@') as [string, string];

          const first = await pending(mailboxId, 'deals', 'deals-k7p2', domain);
          await page.goto(`${base}${box}/settings`);
          await expect(page.locator('#address-card').getAttribute('data-assignment-state')).resolves.toBe('pending');
          await expect(page.locator('#address-card').getByRole('status').textContent()).resolves.toMatch(/pending.*New alias on .*waiting for activation/);
          await expectAccessible(page);
          await shoot(page, `settings-alias-pending-${kind}`);
          await activateAssignment(app.started.deps, first);
          await page.locator('#address-card[data-assignment-state=active]').waitFor();
          await expect(page.locator('#address-card .addr code', { hasText: `deals-k7p2@${domain}` }).isVisible()).resolves.toBe(true);
          await expect(page.locator('#address-card').getByRole('status').textContent()).resolves.toMatch(/active.*done/);

          // An alias whose address is taken (here: the mailbox's own) fails, and says why.
          const second = await pending(mailboxId, primaryLocal, primaryLocal, domain);
          await page.reload();
          await expect(page.locator('#address-card').getAttribute('data-assignment-state')).resolves.toBe('pending');
          await activateAssignment(app.started.deps, second);
          await page.locator('#address-card[data-assignment-state=failed]').waitFor();
          const failed = (await page.locator('#address-card').getByRole('status').textContent())!;
          expect(failed).toMatch(/failed.*New alias on/);
          const row = await db.selectFrom('address_assignments').select(['status', 'error']).where('id', '=', second).executeTakeFirstOrThrow();
          expect(row.status).toBe('failed');
          expect(failed).toContain(JSON.parse(row.error!).message);
          await expectAccessible(page);
          await shoot(page, `settings-alias-failed-${kind}`);
          await page.setViewportSize({ width: 390, height: 844 });
          expect(await overflowsSideways(page)).toMatchObject({ overflow: false });
        } finally {
          await page.close();
        }
      });
    });
  }
});
