// The searcher metric over the hyperparameter space, as optuna-dashboard's first plots: a contour of
// two chosen hyperparameters and a slice per hyperparameter (uPlot, vendored; charts.js's helpers).
"use strict";

// Hyperparameters whose value differs between validated trials: a constant has no slice or contour.
function varyingHparams(trials, names) {
  const rows = validatedTrials(trials);
  return names.filter((n) => new Set(rows.map((t) => pedl.fmt(t.hparams[n]))).size > 1);
}

function validatedTrials(trials) {
  return trials.filter((t) => typeof t.best_validation_metric === "number" && isFinite(t.best_validation_metric));
}

// One contour axis: numbers (log10 where asked and every value is positive, drawn on a linear
// scale of the exponent and labelled with the values) or category indices.
function contourAxis(rows, name, log) {
  const axis = hparamAxis(rows, name);
  const isLog = log && !axis.categories && axis.values.every((v) => v > 0);
  const at = axis.values.map((v) => (isLog ? Math.log10(v) : v));
  let lo = Math.min(...at), hi = Math.max(...at);
  if (axis.categories) { lo = -0.5; hi = axis.categories.length - 0.5; }
  const pad = axis.categories ? 0 : (hi - lo) * 0.04 || 0.5;
  lo -= pad; hi += pad;
  return { name, categories: axis.categories, isLog, at, lo, hi };
}

// The metric at each cell of a GRID x GRID field over two axes, interpolated from the trials by
// inverse-distance weighting on the axes scaled to 0..1 (a trial's own cell takes its value).
const GRID = 40;
function metricField(xAxis, yAxis, metric) {
  const xs = xAxis.at.map((v) => (v - xAxis.lo) / (xAxis.hi - xAxis.lo));
  const ys = yAxis.at.map((v) => (v - yAxis.lo) / (yAxis.hi - yAxis.lo));
  const field = new Float64Array(GRID * GRID);
  for (let j = 0; j < GRID; j++) {
    const cy = (j + 0.5) / GRID;
    for (let i = 0; i < GRID; i++) {
      const cx = (i + 0.5) / GRID;
      let num = 0, den = 0, exact = null;
      for (let k = 0; k < metric.length; k++) {
        const d2 = (xs[k] - cx) ** 2 + (ys[k] - cy) ** 2;
        if (d2 < 1e-12) { exact = metric[k]; break; }
        const w = 1 / (d2 * d2);  // distance ** -4: near trials dominate, far ones barely count
        num += w * metric[k]; den += w;
      }
      field[j * GRID + i] = exact !== null ? exact : num / den;
    }
  }
  return field;
}

// Two hyperparameters against the searcher metric: the interpolated field as coloured cells, each
// trial a dot in its own metric's colour.
class ContourChart {
  constructor(container, legend) { this.container = container; this.legend = legend; this.plot = null; }
  draw(trials, xName, yName, metricName, smallerIsBetter, log = false) {
    if (this.plot) { this.plot.destroy(); this.plot = null; }
    const rows = validatedTrials(trials).filter((t) => xName in t.hparams && yName in t.hparams);
    for (const key of ["x", "y", "log", "trials", "metricRange"]) delete this.container.dataset[key];
    this.legend.textContent = "";
    if (!xName || !yName || xName === yName || rows.length < 2) {
      const why = rows.length < 2 ? "Needs two validated trials." : "Pick two different hyperparameters.";
      this.container.replaceChildren(pedl.el("p", { class: "muted", text: why }));
      return;
    }
    const xAxis = contourAxis(rows, xName, log), yAxis = contourAxis(rows, yName, log);
    const metric = rows.map((t) => t.best_validation_metric);
    const lo = Math.min(...metric), hi = Math.max(...metric);
    const field = metricField(xAxis, yAxis, metric);
    const order = xAxis.at.map((_, k) => k).sort((a, b) => xAxis.at[a] - xAxis.at[b]);
    Object.assign(this.container.dataset, {
      x: xName, y: yName, trials: String(rows.length), metricRange: JSON.stringify([lo, hi]),
      log: [xAxis, yAxis].filter((a) => a.isLog).map((a) => a.name).join(","),
    });
    this.legend.textContent = `blue: ${pedl.fmt(smallerIsBetter ? lo : hi)} (best) · red: ${pedl.fmt(smallerIsBetter ? hi : lo)} (worst)`;
    const scale = (a) => ({ time: false, range: [a.lo, a.hi] });
    const axis = (a) => ({
      label: a.name + (a.isLog ? " (log)" : ""), size: 50,
      ...(a.categories ? { values: (u, ticks) => ticks.map((v) => (Number.isInteger(v) ? a.categories[v] ?? "" : "")), incrs: [1] }
        : a.isLog ? { values: (u, ticks) => ticks.map((v) => String(Number(Math.pow(10, v).toPrecision(2)))), incrs: [0.25, 0.5, 1, 2, 5] } : {}),
    });
    const cellEdge = (a, n) => a.lo + ((a.hi - a.lo) * n) / GRID;
    this.container.replaceChildren();
    this.plot = new uPlot({
      width: chartWidth(this.container), height: 380,
      scales: { x: scale(xAxis), y: scale(yAxis) },
      axes: [axis(xAxis), { ...axis(yAxis), size: 80 }],
      legend: { show: false }, cursor: { show: false },
      series: [{ label: xName }, { label: yName, paths: () => null, points: { show: false } }],
      hooks: { drawClear: [(u) => {  // the field, under the axes' grid
        const ctx = u.ctx;
        ctx.save();
        const xs = [], ys = [];  // whole-pixel cell edges: neighbours neither overlap nor leave gaps
        for (let n = 0; n <= GRID; n++) {
          xs.push(Math.round(u.valToPos(cellEdge(xAxis, n), "x", true)));
          ys.push(Math.round(u.valToPos(cellEdge(yAxis, n), "y", true)));
        }
        for (let j = 0; j < GRID; j++) {
          for (let i = 0; i < GRID; i++) {
            ctx.fillStyle = metricColor(field[j * GRID + i], lo, hi, smallerIsBetter, 78);
            ctx.fillRect(xs[i], ys[j + 1], xs[i + 1] - xs[i], ys[j] - ys[j + 1]);
          }
        }
        ctx.restore();
      }], draw: [(u) => {  // the trials on top
        const ctx = u.ctx, r = 4 * devicePixelRatio;
        ctx.save();
        ctx.strokeStyle = "#111";
        rows.forEach((t, k) => {
          ctx.beginPath();
          ctx.arc(u.valToPos(xAxis.at[k], "x", true), u.valToPos(yAxis.at[k], "y", true), r, 0, 2 * Math.PI);
          ctx.fillStyle = metricColor(metric[k], lo, hi, smallerIsBetter);
          ctx.fill(); ctx.stroke();
        });
        ctx.restore();
      }] },
    }, [order.map((k) => xAxis.at[k]), order.map((k) => yAxis.at[k])], this.container);
  }
}

// The metric against each varying hyperparameter, side by side (one small scatter each).
class SlicePlots {
  constructor(container) { this.container = container; this.charts = []; }
  draw(trials, names, metricName, logX = false, logY = false) {
    for (const chart of this.charts) chart.destroy();
    this.charts = [];
    const varying = varyingHparams(trials, names);
    if (!varying.length) {
      this.container.replaceChildren(pedl.el("p", { class: "muted", text: "No hyperparameter varies among the validated trials yet." }));
      return;
    }
    const boxes = varying.map((name) => pedl.el("div", { class: "chart slice", "data-name": name }));
    this.container.replaceChildren(...boxes);
    for (const box of boxes) chartWidth(box);  // all measured in one layout, before any is drawn
    varying.forEach((name, i) => {
      const chart = new ScatterChart(boxes[i], 240);
      chart.draw(trials, name, metricName, logX, logY);
      this.charts.push(chart);
    });
  }
}
