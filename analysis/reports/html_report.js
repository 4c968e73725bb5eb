// The script of a `sim report --html` page (built into `sim`; see analysis/reports/html_report_page.cc).
// It runs before Chart.js is loaded, so that it sees any error Chart.js raises; once the document is
// parsed it builds one Chart.js chart per <canvas data-chart="i"> from the page's data blob, then
// checks that every chart drew marks and writes the result into the element #servesim-selfcheck:
//   {"charts_expected": n, "charts_drawn": m, "failed": [titles], "errors": [messages],
//    "render_ms": time to build and draw the charts, "legend_items_max": the most entries a legend
//    shows, "clipped_points": points drawn on a clipped axis' edge}
//
// The data blob (the JSON script element #servesim-data) is {"charts": [chart...]}:
//   chart  = {type: "line" (numeric x) | "bar" (categories), x: axis, y: axis, series: [series...],
//             logToggle: true when the card has a "log x" button, logToggleY: the same for y,
//             logX: true when x starts logarithmic (values spread over orders of magnitude)}
//   axis   = {title, min?, max?, labels?: bar categories, ticks?: names of integer x values,
//             integer?: true when only whole numbers make sense as ticks,
//             clip?: (y) where the axis stops; larger values are drawn on the top edge as triangles,
//             with their values in the tooltip, until "log y" shows the whole range}
//   series = {label, color: palette index (or a "#rrggbb"),
//             draw: "line" | "dash" | "step" | "points" | "markers" | "bar",
//             x: [...], y: [...] (bar: y only, one per category), lo?/hi?: a band around y,
//             names?: a name per point for its tooltip, shape?: a point style index, radius?: of markers,
//             keep?: always in the legend (as dashed lines are),
//             styles?: a style per point: 0 filled, 1 hollow (missed an SLO), 2 cross (overloaded)}
// A legend shows at most LEGEND_CAP entries (and every dashed line: SLOs, diagonals), then "+N more",
// which shows the rest when clicked.
(function () {
  'use strict';
  const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2',
                   '#7f7f7f', '#bcbd22', '#17becf'];
  const SHAPES = ['circle', 'triangle', 'rect', 'rectRot', 'star', 'crossRot'];
  const LEGEND_CAP = 10;
  const errors = [];

  window.addEventListener('error', (e) => errors.push(String(e.message || e.type)));
  window.addEventListener('unhandledrejection', (e) => errors.push('unhandled rejection: ' + e.reason));
  const consoleError = console.error;
  console.error = function (...args) {
    errors.push(args.map(String).join(' '));
    consoleError.apply(console, args);
  };

  function colorOf(s) { return typeof s.color === 'string' ? s.color : PALETTE[(s.color || 0) % PALETTE.length]; }

  // A series' points; with a clip, values above it sit on it, marked (c) and keeping their own (t).
  function points(s, ys, clip) {
    return s.x.map((x, i) => {
      const p = {x: x, y: ys[i], n: s.names ? s.names[i] : undefined, s: s.styles ? s.styles[i] : 0};
      if (clip !== undefined && ys[i] > clip) Object.assign(p, {y: clip, t: ys[i], c: true});
      return p;
    });
  }

  // Per-point marker options: a clipped point is a triangle, an overloaded one a cross, a miss
  // hollow.
  function markerOptions(s, color, radius) {
    const shape = SHAPES[(s.shape || 0) % SHAPES.length];
    const raw = (ctx) => ctx.raw || {};
    return {
      pointStyle: (ctx) => (raw(ctx).c ? 'triangle' : raw(ctx).s === 2 ? 'crossRot' : shape),
      pointRadius: (ctx) => (raw(ctx).c || raw(ctx).s === 2 ? Math.max(radius, 5) : radius),
      pointBackgroundColor: (ctx) => (raw(ctx).s === 1 && !raw(ctx).c ? '#ffffff' : color),
      pointBorderWidth: (ctx) => (raw(ctx).s ? 2 : 1),
    };
  }

  // Chart.js datasets of one series; a band is two hidden-from-legend datasets filled between.
  function datasets(s, bar, clip) {
    const color = colorOf(s);
    if (bar) return [{label: s.label, data: s.y, backgroundColor: color, borderColor: color}];
    const out = [];
    if (s.lo && s.hi) {
      const band = {borderWidth: 0, pointRadius: 0, backgroundColor: color + '33', band: true};
      out.push(Object.assign({label: s.label + ' (max)', data: points(s, s.hi, clip), fill: false}, band));
      out.push(Object.assign({label: s.label + ' (min)', data: points(s, s.lo, clip), fill: '-1'}, band));
    }
    const cloud = s.draw === 'points';
    const lonely = s.x.length < 2;  // a line needs two points: draw a lone one as a marker
    const radius = s.radius || (cloud ? 2 : s.draw === 'markers' || lonely ? 3.5 : 0);
    const main = {
      label: s.label, data: points(s, s.y, clip), borderColor: color, backgroundColor: color,
      borderWidth: s.draw === 'dash' ? 1.5 : 2, borderDash: s.draw === 'dash' ? [6, 4] : [],
      stepped: s.draw === 'step' ? 'after' : false, showLine: !cloud, fill: false,
      keep: s.draw === 'dash' || !!s.keep,  // always in the legend
      pointRadius: radius, pointStyle: SHAPES[(s.shape || 0) % SHAPES.length],
      legendStyle: s.draw === 'line' || s.draw === 'step' ? 'line' : SHAPES[(s.shape || 0) % SHAPES.length],
    };
    if (radius > 0 && (s.styles || clip !== undefined)) Object.assign(main, markerOptions(s, color, radius));
    if (clip !== undefined) main.clip = 8;  // room for the triangles on the top edge
    out.push(main);
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

  // The legend's entries: every dashed line, and the first LEGEND_CAP others, then "+N more" (or,
  // once clicked, all of them and "show fewer").
  function legendLabels(state) {
    return (chart) => {
      const items = Chart.defaults.plugins.legend.labels.generateLabels(chart)
        .filter((item) => !chart.data.datasets[item.datasetIndex].band);
      // Each entry as its marker (a line for the dashed ones), not as its point 0's style.
      items.forEach((item) => {
        const d = chart.data.datasets[item.datasetIndex];
        const dashed = d.borderDash && d.borderDash.length > 0;
        item.pointStyle = chart.config.type === 'bar' ? 'rect' : dashed ? 'line' : d.legendStyle;
        item.fillStyle = d.borderColor;
        item.lineWidth = dashed ? 2 : 1;
      });
      const others = items.filter((item) => !chart.data.datasets[item.datasetIndex].keep);
      if (others.length <= LEGEND_CAP) return items;
      const more = {text: state.legendAll ? 'show fewer' : '+' + (others.length - LEGEND_CAP) + ' more',
                    fillStyle: 'rgba(0,0,0,0)', strokeStyle: 'rgba(0,0,0,0)', lineWidth: 0, hidden: false,
                    datasetIndex: -1, more: true, pointStyle: 'line'};
      const shown = state.legendAll ? others : others.slice(0, LEGEND_CAP);
      return items.filter((item) => shown.includes(item) || chart.data.datasets[item.datasetIndex].keep).concat([more]);
    };
  }

  // A legend of many entries takes rows from the plot: the chart grows by them instead (entries of
  // about three to a row).
  function growForLegend(canvas, spec) {
    if (!spec || spec.type === 'bar') return;
    const keep = spec.series.filter((s) => s.draw === 'dash' || s.keep).length;
    const others = spec.series.length - keep;
    const shown = keep + Math.min(others, LEGEND_CAP) + (others > LEGEND_CAP ? 1 : 0);
    const rows = Math.ceil(shown / 3);
    if (rows > 1) canvas.parentNode.style.height = (300 + 16 * (rows - 1)) + 'px';
  }

  function config(spec, state) {
    const bar = spec.type === 'bar';
    const clip = !bar && !state.logY && spec.y.clip !== undefined ? spec.y.clip : undefined;
    const sets = [];
    spec.series.forEach((s) => datasets(s, bar, clip).forEach((d) => sets.push(d)));
    const legend = {
      display: sets.filter((d) => !d.band).length > 1,
      labels: {generateLabels: legendLabels(state), usePointStyle: true, boxWidth: 8, boxHeight: 8,
               font: {size: 11}},
      onClick: function (e, item, legend) {
        if (item.more) {
          state.legendAll = !state.legendAll;
          legend.chart.update();
        } else {
          Chart.defaults.plugins.legend.onClick.call(this, e, item, legend);
        }
      },
    };
    const tooltip = {callbacks: {label: (c) => {
      const y = c.raw && c.raw.c ? c.raw.t : c.parsed.y;
      const v = bar ? c.parsed.y : '(' + c.parsed.x + ', ' + y + ')';
      return (c.raw && c.raw.n ? c.raw.n : c.dataset.label) + ': ' + v + (c.raw && c.raw.c ? ', beyond the axis' : '');
    }}};
    const scales = {x: axis(spec.x, bar ? 'category' : state.logX ? 'logarithmic' : 'linear'),
                    y: axis(spec.y, state.logY ? 'logarithmic' : 'linear')};
    if (clip !== undefined) scales.y.max = clip;
    if (state.logY && scales.y.min !== undefined && scales.y.min <= 0) delete scales.y.min;
    if (state.logX && scales.x.min !== undefined && scales.x.min <= 0) delete scales.x.min;
    return {
      type: bar ? 'bar' : 'line',
      data: bar ? {labels: spec.x.labels, datasets: sets} : {datasets: sets},
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, parsing: bar, normalized: true,
        interaction: {mode: 'nearest', intersect: false}, spanGaps: false,
        plugins: {legend: legend, tooltip: tooltip, filler: {propagate: false}},
        scales: scales,
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
    let drawn = 0, legendMax = 0, clipped = 0;
    built.forEach((b) => {
      try {
        if (drewMarks(b.chart)) drawn++; else failed.push(b.title);
        const legend = b.chart.legend && b.chart.legend.legendItems;
        if (legend) legendMax = Math.max(legendMax, legend.length);
        b.chart.data.datasets.forEach((d) => d.data.forEach((p) => { if (p && p.c) clipped++; }));
      } catch (e) {
        failed.push(b.title);
        errors.push('self-check of ' + b.title + ': ' + e.message);
      }
    });
    const out = document.getElementById('servesim-selfcheck');
    out.textContent = JSON.stringify({charts_expected: expected, charts_drawn: drawn, failed: failed, errors: errors,
                                      render_ms: Math.round(renderMs), legend_items_max: legendMax,
                                      clipped_points: clipped});
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
    const specs = [];
    canvases.forEach((canvas) => {
      const title = canvas.getAttribute('aria-label');
      const spec = data.charts[+canvas.dataset.chart];
      const state = {logX: !!(spec && spec.logX), logY: false, legendAll: false};
      try {
        growForLegend(canvas, spec);
        const entry = {title: title, chart: new Chart(canvas, config(spec, state))};
        built.push(entry);
        specs[+canvas.dataset.chart] = {spec: spec, state: state, entry: entry, canvas: canvas};
      } catch (e) {
        errors.push('chart "' + title + '": ' + e.message);
      }
    });
    // A log toggle redraws its chart with the axis switched (and a clipped y axis unclipped).
    document.querySelectorAll('button[data-log-toggle]').forEach((button) => {
      const c = specs[+button.dataset.logToggle];
      if (!c) return;
      const key = button.dataset.axis === 'y' ? 'logY' : 'logX';
      button.addEventListener('click', () => {
        c.state[key] = !c.state[key];
        button.textContent = (c.state[key] ? 'linear ' : 'log ') + button.dataset.axis;
        c.entry.chart.destroy();
        c.entry.chart = new Chart(c.canvas, config(c.spec, c.state));
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
