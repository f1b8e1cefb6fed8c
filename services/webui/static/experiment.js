// The experiment page: live learning curves, hyperparameter views, trials, searcher decisions, actions.
"use strict";

(async () => {
  const { api, el, fmt, poll, follow, stateBadge } = pedl;
  const id = pedl.idFromPath();
  const $ = (name) => document.getElementById(name);
  const started = pedl.started;  // the first requests, sent from <head> (experiment_start.js)
  pedl.setupNav(started.me).catch(() => {}); // not awaited: the data streams meanwhile

  const store = new MetricStore();
  const curves = new CurvesChart($("curves"));
  const scatter = new ScatterChart($("scatter"));
  const parallel = new ParallelChart($("parallel"));
  const contour = new ContourChart($("contour"), $("contour-legend"));
  const slices = new SlicePlots($("slices"));
  let detail = null, caughtUp = false, drawnVersion = -1, trialsShape = "";
  // Curve points the page asks for over all trials: enough for a smooth chart, little to parse.
  const CURVE_POINTS = 20000;

  // Trials chosen to compare (2-10): their page's URL is the selection.
  const selected = new Set();
  function updateCompare() {
    const ids = [...selected].sort((a, b) => a - b);
    const link = $("compare-link");
    link.href = `/experiments/${id}/compare?trials=${ids.join(",")}`;
    link.hidden = ids.length < 2 || ids.length > 10;
    $("compare-count").textContent = ids.length ? `${ids.length} selected` + (ids.length > 10 ? " (at most 10)" : "") : "";
  }
  const fixedColumns = [
    { key: "select", label: "Compare", get: (t) => (selected.has(t.id) ? 1 : 0), render: (t) => el("input", {
      type: "checkbox", "aria-label": "compare trial " + t.id, "data-trial": String(t.id), checked: selected.has(t.id),
      onchange: (e) => { if (e.target.checked) selected.add(t.id); else selected.delete(t.id); updateCompare(); } }) },
    { key: "id", label: "Trial", get: (t) => t.id, render: (t) => el("a", { href: "/trials/" + t.id, text: String(t.id) }) },
    { key: "state", label: "State", get: (t) => t.state },
    { key: "total_batches", label: "Batches", get: (t) => t.total_batches },
    { key: "best", label: "Best metric", get: (t) => t.best_validation_metric },
    { key: "restarts", label: "Restarts", get: (t) => t.restarts },
    { key: "agent", label: "Agent", get: (t) => t.agent_id },
  ];
  const table = new pedl.SortableTable($("trials"), fixedColumns, { sortKey: "id" });

  function redrawCurves() {
    if (!caughtUp || !detail || drawnVersion === store.version) return;
    drawnVersion = store.version;
    const preferred = detail && detail.searcher_metric ? "v:" + detail.searcher_metric : "t:loss";
    const key = fillMetricPicker($("metric"), store.keys(), preferred);
    if (!key) $("curves").replaceChildren(el("p", { class: "muted", text: "No metrics reported yet." }));
    curves.draw(store, key, $("log-scale").checked, null, Number($("smoothing").value));
    $("points").textContent = fmt(store.rows) + " rows from " + fmt(store.trials.size) + " trials";
  }
  $("metric").addEventListener("change", () => { $("metric").dataset.userPicked = "1"; drawnVersion = -1; redrawCurves(); });
  $("log-scale").addEventListener("change", () => { drawnVersion = -1; redrawCurves(); });
  $("smoothing").addEventListener("input", () => { $("smoothing-value").textContent = Number($("smoothing").value).toFixed(2); drawnVersion = -1; redrawCurves(); });
  for (const name of ["hparam", "log-x", "log-y"]) $(name).addEventListener("change", () => drawHparams(true));
  for (const name of ["contour-x", "contour-y"]) $(name).addEventListener("change", () => { $("contour-x").dataset.userPicked = "1"; drawContour(); });
  $("contour-log").addEventListener("change", () => drawContour());

  // The contour's two hyperparameters: the user's pick, else the two most important, else the first two.
  let ranked = [];
  function fillContourPickers() {
    const names = varyingHparams(detail.trials, detail.plotted_hparams);
    for (const select of [$("contour-x"), $("contour-y")]) {
      if ([...select.options].map((o) => o.value).join("|") !== names.join("|")) {
        select.replaceChildren(...names.map((n) => el("option", { value: n, text: n })));
      }
    }
    if ($("contour-x").dataset.userPicked && names.includes($("contour-x").value) && names.includes($("contour-y").value)) return;
    const order = ranked.filter((n) => names.includes(n)).concat(names.filter((n) => !ranked.includes(n)));
    if (order.length) $("contour-x").value = order[0];
    if (order.length > 1) $("contour-y").value = order[1];
  }
  function drawContour() {
    contour.draw(detail.trials, $("contour-x").value, $("contour-y").value, detail.searcher_metric, detail.smaller_is_better, $("contour-log").checked);
  }

  function drawHparams(force = false) {
    const shape = JSON.stringify(detail.trials.map((t) => [t.id, t.best_validation_metric])) + $("hparam").value;
    if (!force && shape === trialsShape) return;
    trialsShape = shape;
    scatter.draw(detail.trials, $("hparam").value, detail.searcher_metric, $("log-x").checked, $("log-y").checked);
    parallel.draw(detail.trials, detail.plotted_hparams, detail.searcher_metric, detail.smaller_is_better);
    slices.draw(detail.trials, detail.plotted_hparams, detail.searcher_metric, $("log-x").checked, $("log-y").checked);
    fillContourPickers();
    drawContour();
    if (validatedTrials(detail.trials).length) mark("plots");
  }

  // Importance is asked again only when the trials' best metrics changed, at most every 10 s.
  let importanceShape = "", importanceAsked = 0;
  // The first ask goes out with the summary's, not after the summary is drawn.
  let firstImportance = started.importance;
  async function drawImportance() {
    const shape = JSON.stringify(detail.trials.map((t) => t.best_validation_metric));
    if (shape === importanceShape || Date.now() - importanceAsked < 10000) return;
    importanceShape = shape; importanceAsked = Date.now();
    const box = $("importance");
    try {
      const asked = firstImportance || api(`/api/experiments/${id}/importance`);
      firstImportance = null;
      const result = await asked;
      requestAnimationFrame(() => mark("importance"));  // drawn by the next frame
      if (!result.importance.length) {
        box.replaceChildren(el("p", { class: "muted", text: `Shown once ${result.min_trials} trials have a ${result.metric} value and a hyperparameter varies.` }));
        return;
      }
      const before = ranked.slice(0, 2).join("|");
      ranked = result.importance.map((i) => i.name);
      if (ranked.slice(0, 2).join("|") !== before && !$("contour-x").dataset.userPicked) { fillContourPickers(); drawContour(); }
      box.replaceChildren(el("table", { id: "importance-table" }, el("tr", {}, el("th", { text: "Hyperparameter" }), el("th", { text: "Importance" })),
        result.importance.map((i) => el("tr", { "data-name": i.name }, el("td", { text: i.name }),
          el("td", {}, el("span", { class: "bar" }, el("span", { style: `width:${Math.round(i.importance * 100)}%` })), " " + i.importance.toFixed(3))))));
    } catch (error) {
      box.replaceChildren(el("p", { class: "error", text: error.message }));
    }
  }

  function render() {
    document.title = "Experiment " + id + " · pedl";
    $("title").textContent = "Experiment " + id + (detail.name ? " · " + detail.name : "");
    if (document.activeElement !== $("notes")) $("notes").value = detail.notes || "";
    $("description").textContent = detail.description || "";
    stateBadge($("state"), detail.state);
    // Why the experiment failed: the scheduler names the first failing trial's cause.
    $("experiment-error").textContent = detail.error ? "Error: " + detail.error : "";
    $("experiment-error").hidden = !detail.error;
    const progress = detail.progress === null ? "" : Math.round(detail.progress * 100) + "% · ";
    $("summary").textContent = progress + detail.num_trials + " trials · " + (detail.searcher || "") +
      " searcher · owner " + (detail.owner || "(none)") + " · created " + pedl.when(detail.created_at);
    $("searcher-metric").textContent = (detail.searcher_metric || "") + (detail.smaller_is_better ? " (smaller is better)" : " (larger is better)");
    $("config").textContent = detail.config_yaml;
    const live = detail.state === "ACTIVE" || detail.state === "PAUSED";
    $("kill").disabled = !live;
    $("pause").disabled = detail.state !== "ACTIVE";
    $("activate").disabled = detail.state !== "PAUSED" && detail.state !== "ERROR";  // ERROR: the scheduler revives an experiment the infrastructure ended, or says why not

    const hparamColumns = detail.hparam_names.map((name) => ({ key: "hp:" + name, label: name, get: (t) => t.hparams[name] }));
    table.setColumns(fixedColumns.concat(hparamColumns));
    table.render(detail.trials);

    const picker = $("hparam");
    if ([...picker.options].map((o) => o.value).join("|") !== detail.plotted_hparams.join("|")) {
      picker.replaceChildren(...detail.plotted_hparams.map((n) => el("option", { value: n, text: n })));
    }
    drawHparams();
    drawImportance();

    const decisions = detail.rungs.length || detail.lineage.length;
    $("searcher-section").hidden = !decisions;
    $("rungs").replaceChildren(...(detail.rungs.length ? [el("h3", { text: "Stopped at a rung (ASHA)" }),
      el("table", {}, el("tr", {}, el("th", { text: "Rung (batches)" }), el("th", { text: "Trials stopped there" })),
        detail.rungs.map((r) => el("tr", {}, el("td", { class: "num", text: fmt(r.batches) }),
          el("td", {}, r.stopped_trials.flatMap((t, i) => [i ? ", " : "", el("a", { href: "/trials/" + t, text: String(t) })])))))] : []));
    $("lineage").replaceChildren(...(detail.lineage.length ? [el("h3", { text: detail.lineage_title }),
      el("table", {}, el("tr", {}, el("th", { text: "Trial" }), el("th", { text: "Copied from" })),
        detail.lineage.map((l) => el("tr", {}, el("td", {}, el("a", { href: "/trials/" + l.trial_id, text: String(l.trial_id) })),
          el("td", {}, el("a", { href: "/trials/" + l.parent_trial_id, text: String(l.parent_trial_id) })))))] : []));
    document.body.dataset.state = detail.state;
  }

  async function refresh() {
    detail = pedl.trialRows(await api(`/api/experiments/${id}?columns=1`));
    render();
  }

  // Notes: kept by the scheduler; only the owner or an admin may change them (it says so otherwise).
  $("save-notes").addEventListener("click", async () => {
    $("notes-status").textContent = "";
    try {
      const result = await api(`/api/experiments/${id}/notes`, { method: "PUT", body: { notes: $("notes").value } });
      $("notes").value = result.notes;
      $("notes-status").textContent = "saved";
    } catch (error) {
      $("notes-status").textContent = error.message;
    }
  });

  for (const action of ["kill", "pause", "activate"]) {
    $(action).addEventListener("click", async () => {
      $("action-error").textContent = "";
      try {
        const result = await api(`/api/experiments/${id}/${action}`, { method: "POST", body: {} });
        stateBadge($("state"), result.state);
        await refresh();
      } catch (error) {
        $("action-error").textContent = error.message;
      }
    });
  }

  // Summary first: the trials table, best metrics and hyperparameter charts come from one query and
  // are painted (the page takes input) before any curve is asked for. Then the curves stream, each
  // trial's cut by the scheduler to what a chart of this many trials can show (first, last, min and
  // max kept): 200 points for a few trials, down to 20 each for 1,000.
  // Load milestones (ms from navigation) for benchmarks/webui_page.py.
  function mark(name) {  // the first time each milestone is reached
    const marks = (window.__marks = window.__marks || {});
    if (!(name in marks)) marks[name] = Math.round(performance.now());
  }
  // The curves are asked for as soon as the summary says how many trials there are, so the
  // scheduler cuts them while the page draws the summary; their events are handled after it.
  detail = await started.detail;
  // Every chart box measured in one layout, before the summary changes the page (else one
  // forced layout per chart drawn); the widths are kept until the window is resized.
  for (const name of ["curves", "scatter", "parallel", "contour"]) chartWidth($(name));
  const points = Math.max(20, Math.min(200, Math.floor(CURVE_POINTS / Math.max(1, detail.trials.length))));
  $("curves").replaceChildren(el("p", { class: "muted", text: "Loading learning curves…" }));
  follow(`/api/experiments/${id}/metrics?max_points=${points}`, {
    onData: (event) => {
      store.add(event);
      if (event.caught_up && !caughtUp) {
        caughtUp = true;
        redrawCurves();
        requestAnimationFrame(() => mark("curves"));  // drawn by the next frame
      }
    },
    onReset: () => { store.reset(); caughtUp = false; },
  });
  render();
  mark("trials");
  // Ready once the browser has laid out and painted the summary (the frame after the drawing).
  requestAnimationFrame(() => setTimeout(() => { document.body.dataset.ready = String(performance.now()); }, 0));
  setInterval(redrawCurves, 1000);
  setTimeout(() => poll(refresh, 3000, (error) => { $("action-error").textContent = error.message; }), 3000);
})();
