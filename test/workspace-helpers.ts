import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { expect } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';

// Helpers for the dashboard workspace journeys: sign in, look (screenshots in test/artifacts/),
// accessibility (axe-core, run through the DevTools protocol so the pages keep their CSP) and the
// narrow-screen overflow check.

export const ARTIFACTS = path.join(import.meta.dirname, 'artifacts');
const AXE_SOURCE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** Signs in as `email` (the suite's browser is shared: whoever was signed in is signed out first). */
export async function signIn(page: Page, base: string, email: string, password = 'a long test password'): Promise<void> {
  await page.context().clearCookies();
  await page.goto(`${base}/users/sign_in`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await Promise.all([page.waitForURL(`${base}/`), page.getByRole('button', { name: 'Sign in' }).click()]);
}

/** A full-page screenshot under test/artifacts/ (gitignored), for people to look at. */
export async function shoot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** Runs axe-core on the page; fails on serious or critical violations, naming them. */
export async function expectAccessible(page: Page): Promise<void> {
  await page.evaluate(AXE_SOURCE);
  const violations = (await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(ctx: unknown, opts: unknown): Promise<{ violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[] }> } }).axe;
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) }));
  })) as { id: string; impact: string; help: string; targets: string[] }[];
  const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(bad, `${page.url()}: ${JSON.stringify(bad, null, 1)}`).toEqual([]);
}

/** True when the page is wider than the viewport (something overflows sideways). */
export async function overflowsSideways(page: Page): Promise<{ overflow: boolean; width: number; culprits: string[] }> {
  return page.evaluate(() => {
    const width = document.documentElement.clientWidth;
    const culprits: string[] = [];
    for (const el of Array.from(document.body.querySelectorAll('*'))) {
      const r = el.getBoundingClientRect();
      if (r.right > width + 1 && culprits.length < 5) culprits.push(`${el.tagName.toLowerCase()}.${(el as HTMLElement).className}`);
    }
    return { overflow: document.documentElement.scrollWidth > width, width, culprits };
  });
}

/** A page in a 390 px wide context that shares the session cookies of `from`. */
export async function narrowPage(context: BrowserContext): Promise<Page> {
  const page = await context.newPage();
  await page.setViewportSize({ width: 390, height: 844 });
  return page;
}
