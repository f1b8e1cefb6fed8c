// Metric histories and the charts drawn from them (uPlot, vendored under /static/vendor).
"use strict";

// Every trial's rows as the metrics stream sent them: trial id -> {t: training, v: validation,
// g: the custom metric group a trial page's group chart asked for}, each {b: [batches], m: [metric objects]}.
class MetricStore {
  constructor() { this.reset(); }
  reset() { this.trials = new Map(); this.names = new Set(); this.rows = 0; this.version = 0; }
  add(event) {
    for (const [trialId, kind, batches, metrics] of event.series) {
      let trial = this.trials.get(trialId);
      if (!trial) this.trials.set(trialId, trial = { t: { b: [], m: [] }, v: { b: [], m: [] }, g: { b: [], m: [] } });
      const series = trial[kind];
      for (let i = 0; i < batches.length; i++) {
        series.b.push(batches[i]);
        series.m.push(metrics[i]);
      }
      const seen = new Set();
      for (const m of metrics) for (const name in m) if (!seen.has(name)) { seen.add(name); this.names.add(kind + ":" + name); }
      this.rows += batches.length;
    }
    this.version++;
  }
  // [batches, values] of one trial for a key such as "v:validation_loss" (non-numbers as null).
  xy(trialId, key, positiveOnly = false) {
    const kind = key[0], name = key.slice(2);
    const series = this.trials.get(trialId)[kind];
    const ys = series.m.map((m) => {
      const v = m[name];
      return typeof v === "number" && (!positiveOnly || v > 0) ? v : null;
    });
    return [series.b, ys];
  }
  keys() {
    return [...this.names].sort((a, b) => (a[0] === b[0] ? a.localeCompare(b) : a[0] === "v" ? -1 : 1));
  }
}

function metricLabel(key) {
  if (key[0] === "g") return key.slice(2);  // its group names it: the chart sits under the group's heading
  return (key[0] === "v" ? "validation " : "training ") + key.slice(2);
}

function trialColor(index, count) {
  const hue = (index * 137.508) % 360;
  return `hsl(${hue}, 65%, ${count > 50 ? 55 : 45}%)`;
}

// Tick steps for batch counts: whole numbers only.
const BATCH_INCRS = [1, 2, 5].flatMap((m) => [1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8].map((e) => m * e)).sort((a, b) => a - b);

// Each chart box's width, measured once (reading it after the page changed forces a layout: one
// per chart redrawn, 0.3 s of a 1,000-trial page's load) and again after the window is resized.
let chartWidths = new WeakMap();
window.addEventListener("resize", () => { chartWidths = new WeakMap(); });
function chartWidth(container) {
  let width = chartWidths.get(container);
  if (width === undefined) {
    width = Math.max(320, container.clientWidth - 2);
    if (container.clientWidth) chartWidths.set(container, width);  // not while hidden
  }
  return width;
}

// Learning curves of many trials overlaid: x = batches trained, one line per trial.
class CurvesChart {
  constructor(container) { this.container = container; this.plot = null; this.shape = ""; }
  // smoothing: the weight of the running average (0 = raw points), as TensorBoard's slider.
  draw(store, key, logScale, onlyTrials = null, smoothing = 0) {
    if (!key) return;
    const ids = [...store.trials.keys()].filter((id) => !onlyTrials || onlyTrials.has(id)).sort((a, b) => a - b);
    const tables = [], shown = [];
    for (const id of ids) {
      const xy = store.xy(id, key, logScale);
      if (xy[0].length) { tables.push(smoothing > 0 ? [xy[0], smooth(xy[1], smoothing)] : xy); shown.push(id); }
    }
    if (!tables.length) {
      this.destroy();
      this.container.replaceChildren(pedl.el("p", { class: "muted", text: "No " + metricLabel(key) + " yet." }));
      return;
    }
    const data = tables.length === 1 ? tables[0] : uPlot.join(tables);
    const shape = [key, logScale, shown.join(",")].join("|");
    if (this.plot && this.shape === shape) {
      this.plot.setData(data);
      return;
    }
    this.destroy();
    this.container.replaceChildren();
    this.shape = shape;
    const series = [{ label: "batches" }].concat(shown.map((id, i) => ({
      label: "trial " + id, stroke: trialColor(i, shown.length), width: 1.5, spanGaps: true,
      points: { show: shown.length <= 20, size: 5 },
    })));
    this.plot = new uPlot({
      width: chartWidth(this.container), height: 340,
      scales: { x: { time: false }, y: { distr: logScale ? 3 : 1 } },
      axes: [{ label: "batches", incrs: BATCH_INCRS }, { label: metricLabel(key), size: 70 }],
      legend: { show: shown.length <= 20 },
      series,
    }, data, this.container);
  }
  destroy() { if (this.plot) { this.plot.destroy(); this.plot = null; } }
}

// An exponential moving average, debiased as TensorBoard's (the first points are not pulled to 0);
// gaps (null) stay gaps.
function smooth(values, weight) {
  let last = 0, n = 0;
  return values.map((v) => {
    if (typeof v !== "number" || !isFinite(v)) return v;
    last = last * weight + (1 - weight) * v; n += 1;
    return last / (1 - Math.pow(weight, n));
  });
}

function hparamAxis(trials, name) {
  // Numbers stay numbers; anything else is placed by its category's index.
  const values = trials.map((t) => t.hparams[name]);
  if (values.every((v) => typeof v === "number")) return { values, categories: null };
  const labels = values.map((v) => pedl.fmt(v));
  const categories = [...new Set(labels)].sort();
  const index = new Map(categories.map((c, i) => [c, i]));
  return { values: labels.map((l) => index.get(l)), categories };
}

// The searcher metric against one hyperparameter: a point per trial.
class ScatterChart {
  constructor(container, height = 340) { this.container = container; this.height = height; this.plot = null; }
  destroy() { if (this.plot) { this.plot.destroy(); this.plot = null; } }
  // logX / logY: log scales where every value on that axis is positive (numbers only).
  draw(trials, hparam, metricName, logX = false, logY = false) {
    if (this.plot) { this.plot.destroy(); this.plot = null; }
    const rows = trials.filter((t) => typeof t.best_validation_metric === "number" && hparam in t.hparams);
    if (!rows.length || !hparam) {
      this.container.replaceChildren(pedl.el("p", { class: "muted", text: "No validated trials yet." }));
      return;
    }
    const axis = hparamAxis(rows, hparam);
    const pairs = rows.map((t, i) => [axis.values[i], t.best_validation_metric]).sort((a, b) => a[0] - b[0]);
    this.container.replaceChildren();
    const xAxis = { label: hparam };
    if (axis.categories) xAxis.values = (u, ticks) => ticks.map((v) => (Number.isInteger(v) ? axis.categories[v] ?? "" : ""));
    this.plot = new uPlot({
      width: chartWidth(this.container), height: this.height,
      scales: {
        x: { time: false, ...(axis.categories ? { range: [-0.5, axis.categories.length - 0.5] } : { distr: logX && pairs.every((p) => p[0] > 0) ? 3 : 1 }) },
        y: { distr: logY && pairs.every((p) => p[1] > 0) ? 3 : 1 },
      },
      axes: [xAxis, { label: metricName, size: 70 }],
      legend: { show: false },
      series: [{ label: hparam }, {
        label: metricName, stroke: "#2563eb", fill: "#2563eb", paths: () => null,
        points: { show: true, size: 7, stroke: "#2563eb", fill: "#2563eb" },
      }],
    }, [pairs.map((p) => p[0]), pairs.map((p) => p[1])], this.container);
  }
}

// Blue for the best metric, red for the worst (parallel coordinates, contour); lighter for areas.
function metricColor(value, lo, hi, smallerIsBetter, lightness = 45) {
  const scaled = hi > lo ? (value - lo) / (hi - lo) : 0.5;
  const goodness = smallerIsBetter ? 1 - scaled : scaled;
  return `hsl(${Math.round(goodness * 220)}, 70%, ${lightness}%)`;
}

// Parallel coordinates: an axis per hyperparameter and the metric, each drawn between its real
// lowest and highest value (categories at their places), a line per trial, coloured by its metric
// from best (blue) to worst (red).
class ParallelChart {
  constructor(container) { this.container = container; this.plot = null; }
  draw(trials, names, metricName, smallerIsBetter) {
    if (this.plot) { this.plot.destroy(); this.plot = null; }
    const rows = trials.filter((t) => typeof t.best_validation_metric === "number");
    if (!rows.length || !names.length) {
      this.container.replaceChildren(pedl.el("p", { class: "muted", text: "No validated trials yet." }));
      return;
    }
    const hp = names.map((n) => hparamAxis(rows, n));
    const axes = hp.map((a) => a.values).concat([rows.map((t) => t.best_validation_metric)]);
    const labels = names.concat([metricName]);
    const ticks = [];  // per axis: [[scaled position, text], ...]
    const scaled = axes.map((values, a) => {
      const finite = values.filter((v) => typeof v === "number" && isFinite(v));
      const lo = Math.min(...finite), hi = Math.max(...finite);
      const at = (v) => (hi > lo ? (v - lo) / (hi - lo) : 0.5);
      const categories = a < hp.length ? hp[a].categories : null;
      ticks.push(categories ? categories.map((c, i) => [at(i), c]) : hi > lo ? [[0, pedl.fmt(lo)], [1, pedl.fmt(hi)]] : [[0.5, pedl.fmt(lo)]]);
      return values.map((v) => (typeof v !== "number" ? null : at(v)));
    });
    this.container.dataset.axes = JSON.stringify(labels.map((name, a) => ({ name, ticks: ticks[a].map((t) => t[1]) })));
    const metric = scaled[scaled.length - 1];
    const xs = labels.map((_, i) => i);
    const series = [{ label: "axis" }], data = [xs];
    rows.forEach((t, r) => {
      series.push({ label: "trial " + t.id, stroke: metricColor(metric[r], 0, 1, smallerIsBetter), width: 1, points: { show: false } });
      data.push(scaled.map((column) => column[r]));
    });
    this.container.replaceChildren();
    this.plot = new uPlot({
      width: chartWidth(this.container), height: 340,
      scales: { x: { time: false, range: [-0.2, labels.length - 0.8] }, y: { range: [0, 1] } },
      axes: [{ values: (u, ticks) => ticks.map((v) => (Number.isInteger(v) ? labels[v] ?? "" : "")), incrs: [1] },
             { show: false }],
      legend: { show: false },
      series,
      hooks: { draw: [(u) => {  // each axis's real values beside it
        const ctx = u.ctx;
        ctx.save();
        ctx.fillStyle = "#111"; ctx.strokeStyle = "#9ca3af"; ctx.font = `${Math.round(11 * devicePixelRatio)}px sans-serif`;
        ticks.forEach((axisTicks, a) => {
          const x = u.valToPos(a, "x", true);
          ctx.beginPath(); ctx.moveTo(x, u.valToPos(0, "y", true)); ctx.lineTo(x, u.valToPos(1, "y", true)); ctx.stroke();
          for (const [pos, text] of axisTicks) ctx.fillText(text, x + 3, u.valToPos(pos, "y", true) + (pos === 0 ? -3 : pos === 1 ? 11 : 4));
        });
        ctx.restore();
      }] },
    }, data, this.container);
  }
}

// A <select> of metric keys that keeps the user's pick as new metrics appear.
function fillMetricPicker(select, keys, preferred) {
  // The user's own pick (the page marks it as data-user-picked) stays; until there is one, the
  // searcher metric is shown once it exists.
  const current = select.value;
  const have = [...select.options].map((o) => o.value).join("|");
  const keep = select.dataset.userPicked && keys.includes(current);
  if (have === keys.join("|") && (keep || current === preferred || !keys.includes(preferred))) return current;
  select.replaceChildren(...keys.map((k) => pedl.el("option", { value: k, text: metricLabel(k) })));
  const pick = keep ? current : keys.includes(preferred) ? preferred : keys.includes(current) ? current : keys[0];
  if (pick) select.value = pick;
  return select.value;
}
