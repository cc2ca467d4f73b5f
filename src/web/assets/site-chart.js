// The site page's chart: reads the table of a <figure data-site-chart> (one row per hour or day:
// data-t = start in Unix seconds, page views, visitors), draws it with uPlot above the table and
// folds the table into a "Numbers" disclosure. Without JavaScript, or without uPlot, the table stays.
'use strict';
(function () {
  function css(name, fallback) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback;
  }

  const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  function dayLabel(ts) {
    const d = new Date(ts * 1000);
    return d.getUTCDate() + ' ' + MONTHS[d.getUTCMonth()];
  }

  function draw(figure) {
    const wrap = figure.querySelector('[data-chart-table]');
    if (!wrap || typeof uPlot !== 'function') return;
    const rows = Array.from(wrap.querySelectorAll('tbody tr'));
    const t = [];
    const views = [];
    const visitors = [];
    rows.forEach((row) => {
      const cells = row.querySelectorAll('td');
      t.push(Number(row.getAttribute('data-t')));
      views.push(Number(cells[1].textContent));
      visitors.push(Number(cells[2].textContent));
    });
    const chart = document.createElement('div');
    chart.className = 'chart';
    chart.setAttribute('role', 'img');
    chart.setAttribute('aria-label', 'Chart of page views and visitors; the numbers are in the table below it.');
    figure.insertBefore(chart, wrap);
    const accent = css('--accent', '#2457c5');
    const muted = css('--muted', '#5a677a');
    const line = css('--line', '#dde3ea');
    const axis = { stroke: muted, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1 } };
    const daily = figure.getAttribute('data-granularity') === 'day';
    const size = () => ({ width: Math.max(200, figure.clientWidth), height: 220 });
    const plot = new uPlot(
      {
        ...size(),
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
        cursor: { drag: { x: false, y: false } },
        scales: { y: { range: (_u, _min, max) => [0, Math.max(4, max)] } },
        series: [
          {},
          { label: 'Page views', stroke: accent, fill: accent + '22', width: 2, points: { show: false } },
          { label: 'Visitors', stroke: '#d9822b', width: 2, dash: [6, 4], points: { show: false } },
        ],
        // Days: a tick per day (or per week when they crowd), labelled "20 Nov"; hours: uPlot's own.
        axes: [daily ? { ...axis, incrs: [86400, 2 * 86400, 7 * 86400], values: (_u, ticks) => ticks.map(dayLabel) } : axis, { ...axis, size: 44 }],
      },
      [t, views, visitors],
      chart,
    );
    const details = document.createElement('details');
    const summary = document.createElement('summary');
    summary.textContent = 'Numbers';
    details.appendChild(summary);
    figure.insertBefore(details, wrap);
    details.appendChild(wrap);
    let pending = 0;
    window.addEventListener('resize', () => {
      cancelAnimationFrame(pending);
      pending = requestAnimationFrame(() => plot.setSize(size()));
    });
  }

  function init() {
    document.querySelectorAll('[data-site-chart]').forEach(draw);
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
