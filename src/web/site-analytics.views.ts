import type { AppDeps } from '../context.ts';
import type { PublicationsTable } from '../sites/sites.schema.ts';
import { analyticsRange, readAnalytics, type PublicationAnalytics } from '../sites/analytics/query.ts';
import { html, type Html } from './html.ts';
import { formatSize } from './mailbox.views.ts';

// The site page's "Visits" card: totals, a chart of page views and visitors (uPlot, drawn by
// /assets/site-chart.js from the table below it, so without JavaScript the table is the chart),
// and the top pages and referrers. Periods are links (?range=), so they work without JS too.

export const RANGES = {
  '48h': { label: '48 hours', granularity: 'hour', days: 2 },
  '7d': { label: '7 days', granularity: 'day', days: 7 },
  '30d': { label: '30 days', granularity: 'day', days: 30 },
} as const;
export type RangeKey = keyof typeof RANGES;

export function rangeKey(raw: unknown): RangeKey {
  return typeof raw === 'string' && raw in RANGES ? (raw as RangeKey) : '7d';
}

export async function siteVisits(deps: AppDeps, p: PublicationsTable, key: RangeKey): Promise<PublicationAnalytics> {
  const r = RANGES[key];
  const now = deps.now();
  const step = r.granularity === 'hour' ? 3_600_000 : 86_400_000;
  const to = Math.ceil(now.getTime() / step) * step;
  return readAnalytics(deps, p, analyticsRange({ from: new Date(to - r.days * 86_400_000).toISOString(), to: new Date(to).toISOString(), granularity: r.granularity }, now));
}

const number = (n: number) => n.toLocaleString('en-US');

function pointLabel(start: string, granularity: 'hour' | 'day'): string {
  const d = new Date(start);
  const day = d.toLocaleDateString('en-GB', { day: 'numeric', month: 'short', timeZone: 'UTC' });
  return granularity === 'hour' ? `${day} ${start.slice(11, 16)}` : day;
}

function topTable(caption: string, head: string, rows: { value: string; count: number }[], empty: string): Html {
  if (!rows.length) return html`<div><h3>${caption}</h3><p class="muted small">${empty}</p></div>`;
  return html`<div><h3 id="top-${head.toLowerCase()}">${caption}</h3><table class="compact" aria-labelledby="top-${head.toLowerCase()}"><thead><tr><th scope="col">${head}</th><th scope="col" class="num">Views</th></tr></thead>
<tbody>${rows.map((r) => html`<tr><td class="wrap">${r.value}</td><td class="num">${number(r.count)}</td></tr>`)}</tbody></table></div>`;
}

export function visitsCard(a: PublicationAnalytics, key: RangeKey, base: string): Html {
  const r = RANGES[key];
  const g = a.granularity;
  const errors = a.status_codes.filter((s) => Number(s.value) >= 400).reduce((n, s) => n + s.count, 0);
  return html`<div class="card" id="visits"><div class="head"><h2>Visits</h2>
<nav class="toolbar periods" aria-label="Period">${(Object.keys(RANGES) as RangeKey[]).map((k) => html`<a href="${base}/site?range=${k}#visits"${k === key ? html` aria-current="true"` : ''}>${RANGES[k].label}</a>`)}</nav></div>
<dl class="totals">
<div><dt>Page views</dt><dd data-testid="visits-views">${number(a.totals.views)}</dd></div>
<div><dt>Visitors</dt><dd data-testid="visits-visitors">${number(a.totals.visitors)}</dd></div>
<div><dt>Requests</dt><dd>${number(a.totals.requests)}${errors ? html` <span class="hint">(${number(errors)} errors)</span>` : ''}</dd></div>
<div><dt>Sent</dt><dd>${formatSize(a.totals.bytes)}</dd></div>
</dl>
<figure class="site-chart" data-site-chart data-granularity="${g}">
<figcaption>Page views and visitors per ${g}, last ${r.label} (UTC)</figcaption>
<div class="table-wrap" data-chart-table><table class="compact"><thead><tr><th scope="col">${g === 'hour' ? 'Hour' : 'Day'}</th><th scope="col" class="num">Page views</th><th scope="col" class="num">Visitors</th></tr></thead>
<tbody>${a.series.map((p) => html`<tr data-t="${Date.parse(p.start) / 1000}"><td>${pointLabel(p.start, g)}</td><td class="num">${p.views}</td><td class="num">${p.visitors}</td></tr>`)}</tbody></table></div>
</figure>
<div class="grid">${topTable('Top pages', 'Path', a.top_paths, 'No page views yet.')}${topTable('Referrers', 'Host', a.top_referrers, 'No visits from other sites yet.')}</div>
${a.countries_enabled ? topTable('Countries', 'Country', a.countries, 'No page views yet.') : ''}
<p class="hint">Counted without cookies: a visitor is a hash of the address and browser that changes every day, and neither is stored. New visits show within about ten seconds.</p>
</div>`;
}
