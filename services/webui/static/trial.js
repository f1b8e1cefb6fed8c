// The trial page: its curves, hyperparameters, checkpoints, runs, and its logs as they are written.
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
  ], { sortKey: "batches", pageSize: 20 });

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
    for (const line of lines) pre.append(el("span", { class: "line" }, line + "\n")); // text, never HTML
    const extra = pre.childElementCount - MAX_LOG_LINES;
    for (let i = 0; i < extra; i++) pre.firstElementChild.remove();
    if (extra > 0) {
      dropped[pre.id] += extra;
      $(pre.id + "-dropped").textContent = fmt(dropped[pre.id]) + " earlier lines not shown: download the whole log";
    }
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }

  async function refresh() { detail = await api("/api/trials/" + id); render(); }
  await refresh();
  poll(refresh, 3000);
  follow(`/api/trials/${id}/metrics`, {
    onData: (event) => { store.add(event); if (event.caught_up) caughtUp = true; redraw(); },
    onReset: () => { store.reset(); caughtUp = false; },
  });
  setInterval(redraw, 1000);
  $("log-file").href = `/api/trials/${id}/logs.txt`;
  // The newest lines only (the panes keep MAX_LOG_LINES each): a long log is not sent whole. A
  // dropped link reopens the same request, so the panes start again from what it sends.
  follow(`/api/trials/${id}/logs?tail=${2 * MAX_LOG_LINES}`, {
    onData: (event) => {
      const user = [], system = [];
      for (const line of event.lines) (line.system ? system : user).push(line.message);
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
