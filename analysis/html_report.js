// The script of a `sim report --html` page (built into `sim`; see analysis/html_report_page.cc).
// It runs before Chart.js is loaded, so that it sees any error Chart.js raises; once the document is
// parsed it builds one Chart.js chart per <canvas data-chart="i"> from the page's data blob, then
// checks that every chart drew marks and writes the result into the element #servesim-selfcheck:
//   {"charts_expected": n, "charts_drawn": m, "failed": [titles], "errors": [messages],
//    "render_ms": time to build and draw the charts}
//
// The data blob (the JSON script element #servesim-data) is {"charts": [chart...]}:
//   chart  = {type: "line" (numeric x) | "bar" (categories), x: axis, y: axis, series: [series...],
//             logToggle: true when the card has a "log x" button}
//   axis   = {title, min?, max?, labels?: bar categories, ticks?: names of integer x values,
//             integer?: true when only whole numbers make sense as ticks}
//   series = {label, color: palette index, draw: "line" | "dash" | "step" | "points" | "markers" | "bar",
//             x: [...], y: [...] (bar: y only, one per category), lo?/hi?: a band around y,
//             names?: a name per point for its tooltip, shape?: a point style index}
(function () {
  'use strict';
  const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2',
                   '#7f7f7f', '#bcbd22', '#17becf'];
  const SHAPES = ['circle', 'triangle', 'rect'];
  const errors = [];

  window.addEventListener('error', (e) => errors.push(String(e.message || e.type)));
  window.addEventListener('unhandledrejection', (e) => errors.push('unhandled rejection: ' + e.reason));
  const consoleError = console.error;
  console.error = function (...args) {
    errors.push(args.map(String).join(' '));
    consoleError.apply(console, args);
  };

  function colorOf(s) { return PALETTE[(s.color || 0) % PALETTE.length]; }

  function points(s, ys) {
    return s.x.map((x, i) => ({x: x, y: ys[i], n: s.names ? s.names[i] : undefined}));
  }

  // Chart.js datasets of one series; a band is two hidden-from-legend datasets filled between.
  function datasets(s, bar) {
    const color = colorOf(s);
    if (bar) return [{label: s.label, data: s.y, backgroundColor: color, borderColor: color}];
    const out = [];
    if (s.lo && s.hi) {
      const band = {borderWidth: 0, pointRadius: 0, backgroundColor: color + '33', band: true};
      out.push(Object.assign({label: s.label + ' (max)', data: points(s, s.hi), fill: false}, band));
      out.push(Object.assign({label: s.label + ' (min)', data: points(s, s.lo), fill: '-1'}, band));
    }
    const cloud = s.draw === 'points';
    const lonely = s.x.length < 2;  // a line needs two points: draw a lone one as a marker
    out.push({
      label: s.label, data: points(s, s.y), borderColor: color, backgroundColor: color,
      borderWidth: s.draw === 'dash' ? 1.5 : 2, borderDash: s.draw === 'dash' ? [6, 4] : [],
      stepped: s.draw === 'step' ? 'after' : false, showLine: !cloud,
      pointRadius: cloud ? 2 : s.draw === 'markers' || lonely ? 3.5 : 0,
      pointStyle: SHAPES[(s.shape || 0) % SHAPES.length], fill: false,
    });
    return out;
  }

  function axis(a, type) {
    const o = {type: type, title: {display: true, text: a.title}};
    if (a.min !== undefined) o.min = a.min;
    if (a.max !== undefined) o.max = a.max;
    if (a.ticks) o.ticks = {stepSize: 1, callback: (v) => (Number.isInteger(v) ? a.ticks[v] || '' : '')};
    if (a.integer) o.ticks = {precision: 0};
    return o;
  }

  function config(spec) {
    const bar = spec.type === 'bar';
    const sets = [];
    spec.series.forEach((s) => datasets(s, bar).forEach((d) => sets.push(d)));
    const legend = {
      display: sets.filter((d) => !d.band).length > 1,
      labels: {filter: (item, data) => !data.datasets[item.datasetIndex].band, boxHeight: 8},
    };
    const tooltip = {callbacks: {label: (c) => {
      const v = bar ? c.parsed.y : '(' + c.parsed.x + ', ' + c.parsed.y + ')';
      return (c.raw && c.raw.n ? c.raw.n : c.dataset.label) + ': ' + v;
    }}};
    return {
      type: bar ? 'bar' : 'line',
      data: bar ? {labels: spec.x.labels, datasets: sets} : {datasets: sets},
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, parsing: bar, normalized: true,
        interaction: {mode: 'nearest', intersect: false}, spanGaps: false,
        plugins: {legend: legend, tooltip: tooltip, filler: {propagate: false}},
        scales: {x: axis(spec.x, bar ? 'category' : 'linear'), y: axis(spec.y, 'linear')},
      },
    };
  }

  function hexRgb(hex) {
    return [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  }

  // Whether some dataset drew pixels of its own colour where Chart.js placed its points (for bars:
  // half way up the bar). Points outside the plot area (a log axis drops zeros) do not count.
  function drewMarks(chart) {
    const ratio = chart.currentDevicePixelRatio || 1;
    const area = chart.chartArea;
    for (let d = 0; d < chart.data.datasets.length; d++) {
      const ds = chart.data.datasets[d];
      if (ds.band || !chart.isDatasetVisible(d)) continue;
      const rgb = hexRgb(ds.borderColor);
      const elements = chart.getDatasetMeta(d).data;
      const step = Math.max(1, Math.floor(elements.length / 25));
      for (let i = 0; i < elements.length; i += step) {
        const e = elements[i];
        const x = e.x;
        const y = e.base !== undefined && chart.config.type === 'bar' ? (e.y + e.base) / 2 : e.y;
        if (!isFinite(x) || !isFinite(y) || x < area.left - 2 || x > area.right + 2 ||
            y < area.top - 2 || y > area.bottom + 2) continue;
        const px = chart.ctx.getImageData(Math.round(x * ratio) - 3, Math.round(y * ratio) - 3, 7, 7).data;
        for (let p = 0; p < px.length; p += 4) {
          const near = Math.abs(px[p] - rgb[0]) + Math.abs(px[p + 1] - rgb[1]) + Math.abs(px[p + 2] - rgb[2]);
          if (px[p + 3] > 100 && near < 90) return true;
        }
      }
    }
    return false;
  }

  function selfCheck(built, expected, renderMs) {
    const failed = [];
    let drawn = 0;
    built.forEach((b) => {
      try {
        if (drewMarks(b.chart)) drawn++; else failed.push(b.title);
      } catch (e) {
        failed.push(b.title);
        errors.push('self-check of ' + b.title + ': ' + e.message);
      }
    });
    const out = document.getElementById('servesim-selfcheck');
    out.textContent = JSON.stringify({charts_expected: expected, charts_drawn: drawn, failed: failed, errors: errors,
                                      render_ms: Math.round(renderMs)});
    out.dataset.done = '1';
  }

  function build() {
    const start = performance.now();
    const canvases = document.querySelectorAll('canvas[data-chart]');
    const built = [];
    let data = {charts: []};
    try {
      data = JSON.parse(document.getElementById('servesim-data').textContent);
    } catch (e) {
      errors.push('reading the page data: ' + e.message);
    }
    canvases.forEach((canvas) => {
      const title = canvas.getAttribute('aria-label');
      try {
        built.push({title: title, chart: new Chart(canvas, config(data.charts[+canvas.dataset.chart]))});
      } catch (e) {
        errors.push('chart "' + title + '": ' + e.message);
      }
    });
    document.querySelectorAll('button[data-log-toggle]').forEach((button) => {
      const chart = Chart.getChart(document.querySelector('canvas[data-chart="' + button.dataset.logToggle + '"]'));
      button.addEventListener('click', () => {
        const log = chart.options.scales.x.type !== 'logarithmic';
        chart.options.scales.x.type = log ? 'logarithmic' : 'linear';
        button.textContent = log ? 'linear x' : 'log x';
        chart.update();
      });
    });
    // Charts draw synchronously (no animation): check now, and again once pending tasks have run
    // (a resize, a late error).
    const renderMs = performance.now() - start;
    selfCheck(built, canvases.length, renderMs);
    setTimeout(() => selfCheck(built, canvases.length, renderMs), 50);
  }

  document.addEventListener('DOMContentLoaded', () => {
    try {
      build();
    } catch (e) {
      errors.push('building the charts: ' + e.message);
      const out = document.getElementById('servesim-selfcheck');
      if (out) out.textContent = JSON.stringify({charts_expected: -1, charts_drawn: 0, failed: [], errors: errors});
    }
  });
})();
