// Compare 2-10 trials of an experiment side by side: /experiments/ID/compare?trials=3,5,8 (the URL
// is the selection, so it can be shared). Hyperparameters and best metrics as one column per trial,
// differing rows marked; their learning curves overlaid.
"use strict";

(async () => {
  const { api, el, fmt, follow } = pedl;
  const $ = (name) => document.getElementById(name);
  pedl.setupNav();
  const id = Number(location.pathname.split("/")[2]);
  const wanted = (new URLSearchParams(location.search).get("trials") || "").split(",").map(Number).filter((n) => n > 0);
  const chosen = new Set(wanted);
  $("title").textContent = `Compare trials of experiment ${id}`;
  if (chosen.size < 2 || chosen.size > 10) {
    $("status").textContent = "Choose 2 to 10 trials (?trials=1,2,...) on the experiment's page.";
    return;
  }
  const detail = await api(`/api/experiments/${id}?trials=${[...chosen].join(",")}`);  // those trials only
  const trials = detail.trials.filter((t) => chosen.has(t.id));
  const missing = [...chosen].filter((t) => !trials.some((x) => x.id === t));
  $("status").textContent = missing.length ? `Not trials of experiment ${id}: ${missing.join(", ")}` : "";
  const rows = [["State", (t) => t.state], ["Batches", (t) => fmt(t.total_batches)],
    ["Best " + detail.searcher_metric, (t) => (t.best_validation_metric === null ? "" : fmt(t.best_validation_metric))],
    ["Restarts", (t) => String(t.restarts)]]
    .concat(detail.hparam_names.map((n) => [n, (t) => (n in t.hparams ? fmt(t.hparams[n]) : "")]));
  $("compare").replaceChildren(el("table", { id: "compare-table" },
    el("tr", {}, el("th", { text: "" }), trials.map((t) => el("th", {}, el("a", { href: "/trials/" + t.id, text: "Trial " + t.id })))),
    rows.map(([label, get]) => {
      const values = trials.map(get);
      return el("tr", { "data-row": label, class: new Set(values).size > 1 ? "differs" : "" },
        el("th", { text: label }), values.map((v) => el("td", { text: v })));
    })));
  document.body.dataset.compared = trials.map((t) => t.id).join(",");

  const store = new MetricStore();
  const curves = new CurvesChart($("curves"));
  let caughtUp = false, drawn = -1;
  function redraw(force = false) {
    if (!caughtUp || (!force && drawn === store.version)) return;
    drawn = store.version;
    const key = fillMetricPicker($("metric"), store.keys(), "v:" + detail.searcher_metric);
    curves.draw(store, key, $("log-scale").checked, chosen, Number($("smoothing").value));
  }
  for (const name of ["metric", "log-scale", "smoothing"]) $(name).addEventListener("input", () => {
    if (name === "metric") $("metric").dataset.userPicked = "1";
    redraw(true);
  });
  if (!trials.length) return;
  // Only the chosen trials' curves stream (the scheduler picks them), not the whole experiment's.
  follow(`/api/experiments/${id}/metrics?trials=${trials.map((t) => t.id).join(",")}`, {
    onData: (event) => { store.add(event); if (event.caught_up) { caughtUp = true; redraw(); document.body.dataset.ready = "1"; } },
    onReset: () => { store.reset(); caughtUp = false; },
  });
  setInterval(redraw, 1000);
})();
