import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

// Browser tests drive Debian's chromium with playwright-core; without it they are skipped and say so.
export const CHROMIUM = '/usr/bin/chromium';
export const HAVE_CHROMIUM = fs.existsSync(CHROMIUM);
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
// Set CUBBY_SCREENSHOT_DIR to keep screenshots of the pages visited.
const SCREENSHOTS = process.env.CUBBY_SCREENSHOT_DIR;

/** A suite title that says why it was skipped when chromium is missing. */
export function browserSuiteTitle(what: string): string {
  return HAVE_CHROMIUM ? what : `${what}: skipped, ${CHROMIUM} not found (apt-get install chromium)`;
}

/**
 * One browser with a fresh profile. Close it before the app stops: an open browser keeps idle
 * connections to the server.
 */
export async function openChromium(): Promise<{ context: BrowserContext; close(): Promise<void> }> {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-chromium-'));
  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS });
  return {
    context,
    async close() {
      await context.close();
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

export async function screenshot(page: Page, name: string): Promise<void> {
  if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/**
 * One browser for the enclosing suite: opened before its tests, closed after them (register it
 * inside the suite that owns the app, so that it closes before the app stops). Returns a getter.
 */
export function useChromium(): () => BrowserContext {
  let browser: Awaited<ReturnType<typeof openChromium>> | undefined;
  beforeAll(async () => {
    browser = await openChromium();
  });
  afterAll(async () => {
    await browser?.close();
  });
  return () => browser!.context;
}
