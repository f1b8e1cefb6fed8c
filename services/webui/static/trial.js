// The trial page: its curves, its custom metric groups, hyperparameters, checkpoints, runs, and its
// logs as they are written.
"use strict";

(async () => {
  const { api, el, fmt, poll, follow, stateBadge } = pedl;
  const id = pedl.idFromPath();
  const $ = (name) => document.getElementById(name);
  await pedl.setupNav();
  const store = new MetricStore();
  const curves = new CurvesChart($("curves"));
  let detail = null, caughtUp = false, drawnVersion = -1;

  function redraw() {
    if (!caughtUp || drawnVersion === store.version) return;
    drawnVersion = store.version;
    const preferred = detail && detail.experiment.searcher_metric ? "v:" + detail.experiment.searcher_metric : "t:loss";
    const key = fillMetricPicker($("metric"), store.keys(), preferred);
    curves.draw(store, key, $("log-scale").checked);
    $("points").textContent = fmt(store.rows) + " rows";
  }
  $("metric").addEventListener("change", () => { $("metric").dataset.userPicked = "1"; drawnVersion = -1; redraw(); });
  $("log-scale").addEventListener("change", () => { drawnVersion = -1; redraw(); });

  // Checkpoints a page of 20 at a time, sortable over all of them.
  const checkpoints = new pedl.SortableTable($("checkpoints"), [
    { key: "uuid", label: "UUID", get: (c) => c.uuid },
    { key: "batches", label: "Batches", get: (c) => c.total_batches },
    { key: "state", label: "State", get: (c) => c.state },
    { key: "size", label: "Size", get: (c) => c.size, render: (c) => fmt(c.size) + " B" },
    { key: "validation", label: "Validation", get: (c) => c.validation ? Object.entries(c.validation).map(([k, v]) => k + "=" + fmt(v)).join(", ") : "" },
    { key: "download", label: "Download", get: (c) => c.state, render: (c) => c.state === "COMPLETED" ?
      el("a", { href: `/api/checkpoints/${encodeURIComponent(c.uuid)}/download`, text: "tar.gz" }) : "" },
    // Its files with their sizes, each downloadable alone (a <details>, so the table stays short).
    { key: "files", label: "Files", get: (c) => c.files.length, render: (c) => el("details", { class: "checkpoint-files" },
      el("summary", { text: c.files.length + " files" }),
      el("table", {}, c.files.map((f) => el("tr", {},
        el("td", {}, c.state === "COMPLETED" ? el("a", { href: `/api/checkpoints/${encodeURIComponent(c.uuid)}/download?file=${encodeURIComponent(f.path)}`, text: f.path }) : f.path),
        el("td", { class: "num", text: fmt(f.size) + " B" }))))) },
  ], { sortKey: "batches", pageSize: 20 });

  // Each custom metric group: a chart of its own and a table of each metric's figures, both from its
  // rows streamed with ?group=; a group first reported while the page is open appears.
  const groupViews = new Map();
  function renderGroups() {
    const groups = detail.metric_groups || [];
    $("groups-section").hidden = !groups.length;
    for (const g of groups) {
      let view = groupViews.get(g.group);
      if (!view) groupViews.set(g.group, view = groupView(g.group));
      view.heading.textContent = g.group + " · " + fmt(g.reports) + " reports · last at " + fmt(g.last_batches) + " batches";
    }
  }
  function groupView(name) {
    const picker = el("select", {}), chart = el("div", { class: "chart" }), figures = el("div", {});
    const view = { store: new MetricStore(), curves: new CurvesChart(chart), heading: el("h3", {}),
                   caughtUp: false, drawn: -1 };
    $("metric-groups").append(el("div", { class: "metric-group", "data-group": name }, view.heading,
      el("div", { class: "toolbar" }, el("label", {}, "Metric ", picker)), chart, figures));
    view.draw = () => {
      if (!view.caughtUp || view.drawn === view.store.version) return;
      view.drawn = view.store.version;
      view.curves.draw(view.store, fillMetricPicker(picker, view.store.keys(), ""), false);
      figures.replaceChildren(groupTable(view.store));
    };
    picker.addEventListener("change", () => { picker.dataset.userPicked = "1"; view.drawn = -1; view.draw(); });
    follow(`/api/trials/${id}/metrics?group=${encodeURIComponent(name)}`, {
      onData: (event) => { view.store.add(event); if (event.caught_up) view.caughtUp = true; view.draw(); },
      onReset: () => { view.store.reset(); view.caughtUp = false; },
    });
    return view;
  }
  // Per metric: reports holding it, the last value, and min, max and mean of its numbers (NaN and
  // infinities arrive as null: counted, not summed).
  function groupTable(store) {
    const figures = new Map();
    for (const trial of store.trials.values()) {
      for (const m of trial.g.m) {
        for (const [name, v] of Object.entries(m)) {
          let f = figures.get(name);
          if (!f) figures.set(name, f = { count: 0, last: null, min: Infinity, max: -Infinity, sum: 0, numbers: 0 });
          f.count++; f.last = v;
          if (typeof v === "number") { f.numbers++; f.sum += v; f.min = Math.min(f.min, v); f.max = Math.max(f.max, v); }
        }
      }
    }
    const row = (cells, tag) => el("tr", {}, cells.map((c, i) => el(tag, { class: i ? "num" : undefined, text: c })));
    return el("table", { class: "group-figures" }, row(["Metric", "Reports", "Last", "Min", "Max", "Mean"], "th"),
      [...figures.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([name, f]) => row([name, fmt(f.count), fmt(f.last),
        ...(f.numbers ? [fmt(f.min), fmt(f.max), fmt(f.sum / f.numbers)] : ["", "", ""])], "td")));
  }

  function keyValueTable(entries) {
    return el("table", {}, entries.map(([k, v]) => el("tr", {}, el("th", { text: k }), el("td", { text: fmt(v) }))));
  }

  function render() {
    document.title = "Trial " + id + " · pedl";
    $("title").textContent = "Trial " + id;
    const link = $("experiment-link");
    link.href = "/experiments/" + detail.experiment_id;
    link.textContent = "Experiment " + detail.experiment_id + (detail.experiment.description ? " · " + detail.experiment.description : "");
    stateBadge($("state"), detail.state);
    $("summary").textContent = fmt(detail.total_batches) + " batches · best " + (detail.experiment.searcher_metric || "metric") +
      " " + fmt(detail.best_validation_metric) + (detail.agent_id ? " · on " + detail.agent_id : "");
    $("hparams").replaceChildren(keyValueTable(Object.entries(detail.hparams).sort()));
    $("timeline").replaceChildren(keyValueTable([
      ["Started", pedl.when(detail.start_time)], ["Ended", pedl.when(detail.end_time)],
      ["Restarts", detail.restarts], ["Current run", detail.run_id], ["Seed", detail.seed],
      ["Started from trial", detail.parent_trial_id], ["Error", detail.error],
    ]));
    renderGroups();
    if (detail.checkpoints.length) checkpoints.render(detail.checkpoints);
    else $("checkpoints").replaceChildren(el("p", { class: "muted", text: "No checkpoints yet." }));
    document.body.dataset.state = detail.state;
  }

  // Each pane keeps its newest MAX_LOG_LINES lines (a trial may print millions); the whole log is a
  // download away (#log-file).
  const MAX_LOG_LINES = 2000;
  const dropped = { "user-logs": 0, "system-logs": 0 };
  function appendLines(pre, lines) {
    if (!lines.length) return;
    const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    for (const line of lines) {  // text, never HTML; the filter hides what it does not match
      const span = el("span", { class: "line", "data-level": line.level || "", "data-rank": line.rank ?? "" }, line.message + "\n");
      span.hidden = !matches(line.message, span.dataset.level, span.dataset.rank);
      pre.append(span);
    }
    const extra = pre.childElementCount - MAX_LOG_LINES;
    for (let i = 0; i < extra; i++) pre.firstElementChild.remove();
    if (extra > 0) {
      dropped[pre.id] += extra;
      $(pre.id + "-dropped").textContent = fmt(dropped[pre.id]) + " earlier lines not shown: download the whole log";
    }
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }

  // The log filter: text (any case), level and above, rank; the download link takes the same filter.
  const LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"];
  function matches(message, level, rank) {
    const text = $("log-search").value.toLowerCase(), minLevel = $("log-level").value, wantRank = $("log-rank").value;
    if (text && !message.toLowerCase().includes(text)) return false;
    if (wantRank !== "" && rank !== wantRank) return false;
    if (minLevel && LEVELS.indexOf(level) < LEVELS.indexOf(minLevel)) return false;
    return true;
  }
  function applyFilter() {
    for (const span of document.querySelectorAll("pre.logs > span.line")) {
      span.hidden = !matches(span.textContent.replace(/\n$/, ""), span.dataset.level, span.dataset.rank);
    }
    const params = new URLSearchParams();
    if ($("log-search").value) params.set("q", $("log-search").value);
    if ($("log-level").value) params.set("level", $("log-level").value);
    if ($("log-rank").value !== "") params.set("rank", $("log-rank").value);
    $("log-file").href = `/api/trials/${id}/logs.txt` + (params.size ? "?" + params : "");
    $("log-file").textContent = params.size ? "Download the matching lines" : "Download the whole log";
  }
  for (const name of ["log-search", "log-level", "log-rank"]) $(name).addEventListener("input", applyFilter);

  async function refresh() { detail = await api("/api/trials/" + id); render(); }
  await refresh();
  poll(refresh, 3000);
  follow(`/api/trials/${id}/metrics`, {
    onData: (event) => { store.add(event); if (event.caught_up) caughtUp = true; redraw(); },
    onReset: () => { store.reset(); caughtUp = false; },
  });
  setInterval(() => { redraw(); for (const view of groupViews.values()) view.draw(); }, 1000);
  $("log-file").href = `/api/trials/${id}/logs.txt`;
  // The newest lines only (the panes keep MAX_LOG_LINES each): a long log is not sent whole. A
  // dropped link reopens the same request, so the panes start again from what it sends.
  follow(`/api/trials/${id}/logs?tail=${2 * MAX_LOG_LINES}`, {
    onData: (event) => {
      const user = [], system = [];
      for (const line of event.lines) (line.system ? system : user).push(line);
      appendLines($("user-logs"), user);
      appendLines($("system-logs"), system);
    },
    onReset: () => {
      for (const name of ["user-logs", "system-logs"]) {
        $(name).replaceChildren();
        $(name + "-dropped").textContent = "";
        dropped[name] = 0;
      }
    },
  });
})();
