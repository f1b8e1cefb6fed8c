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
    $("checkpoints").replaceChildren(detail.checkpoints.length ? el("table", {},
      el("tr", {}, ["UUID", "Batches", "State", "Size", "Validation", "Download"].map((h) => el("th", { text: h }))),
      detail.checkpoints.map((c) => el("tr", {},
        el("td", { text: c.uuid }), el("td", { class: "num", text: fmt(c.total_batches) }), el("td", { text: c.state }),
        el("td", { class: "num", text: fmt(c.size) + " B" }),
        el("td", { text: c.validation ? Object.entries(c.validation).map(([k, v]) => k + "=" + fmt(v)).join(", ") : "" }),
        el("td", {}, c.state === "COMPLETED" ? el("a", { href: `/api/checkpoints/${encodeURIComponent(c.uuid)}/download`, text: "tar.gz" }) : ""),
      ))) : el("p", { class: "muted", text: "No checkpoints yet." }));
    document.body.dataset.state = detail.state;
  }

  function appendLines(pre, lines) {
    if (!lines.length) return;
    const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.append(document.createTextNode(lines.join("\n") + "\n")); // text, never HTML
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
  let lastLog = 0;
  const openLogs = () => follow(`/api/trials/${id}/logs?after=${lastLog}`, {
    onData: (event) => {
      const user = [], system = [];
      for (const line of event.lines) {
        lastLog = Math.max(lastLog, line.id);
        (line.system ? system : user).push(line.message);
      }
      appendLines($("user-logs"), user);
      appendLines($("system-logs"), system);
    },
  });
  openLogs();
})();
