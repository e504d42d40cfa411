/**
 * Browser harness for the web app's end-to-end tests: Debian's chromium driven by
 * playwright-core, axe-core for accessibility, and screenshots that land in docs/ only when
 * UPDATE_SCREENSHOTS=1 (otherwise in a temp dir, so a normal run never dirties the tree).
 */
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AxeBuilder } from '@axe-core/playwright';
import { chromium, type Browser, type Page } from 'playwright-core';
import { PACKAGE_ROOT } from '../../src/paths.js';

/** Debian's chromium (installed by `.ci/run` with apt). */
export const CHROMIUM = '/usr/bin/chromium';
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];

/** Where screenshots go: docs/screenshots when asked to update them, else a temp dir. */
export const SCREENSHOT_DIR =
  process.env['UPDATE_SCREENSHOTS'] === '1' ? join(PACKAGE_ROOT, 'docs', 'screenshots') : mkdtempSync(join(tmpdir(), 'tg-screenshots-'));

/** Launches headless chromium. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
}

/** A full-page screenshot `<name>.png`; returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const path = join(SCREENSHOT_DIR, `${name}.png`);
  // Toasts come and go on their own clock: keep them out of the picture.
  await page.evaluate("document.querySelectorAll('.toasts').forEach((e) => { e.style.visibility = 'hidden'; })");
  await page.screenshot({ path, fullPage: true, animations: 'disabled', caret: 'hide' });
  await page.evaluate("document.querySelectorAll('.toasts').forEach((e) => { e.style.visibility = ''; })");
  return path;
}

/** The axe-core rule sets checked: WCAG 2.0 and 2.1, A and AA, plus axe's best practices. */
const AXE_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'];

/** axe-core's serious and critical violations on the current page, one line each ([] when clean). */
export async function seriousViolations(page: Page): Promise<string[]> {
  // Legacy mode runs axe in the page itself. The default mode opens a blank page to merge the
  // results of frames (the app has none): on chromium 156 that is a renderer start per
  // analysis, 4–8 s a page on two busy cores.
  const results = await new AxeBuilder({ page }).withTags(AXE_TAGS).setLegacyMode(true).analyze();
  return results.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id}: ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/** Runs axe in light and in dark colour scheme; returns every serious/critical violation found. */
export async function violationsInBothSchemes(page: Page): Promise<string[]> {
  const found: string[] = [];
  for (const colorScheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme });
    found.push(...(await seriousViolations(page)).map((v) => `[${colorScheme}] ${v}`));
  }
  await page.emulateMedia({ colorScheme: 'light' });
  return found;
}
