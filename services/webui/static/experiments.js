// The experiments page: every experiment with its state, progress and best metric; filter and sort.
"use strict";

(async () => {
  const { api, el, fmt, poll } = pedl;
  const $ = (name) => document.getElementById(name);
  await pedl.setupNav();
  let rows = [];
  const columns = [
    { key: "id", label: "ID", get: (e) => e.id, render: (e) => el("a", { href: "/experiments/" + e.id, text: String(e.id) }) },
    { key: "description", label: "Description", get: (e) => e.description },
    { key: "state", label: "State", get: (e) => e.state, render: (e) => el("span", { class: "state " + e.state, text: e.state }) },
    { key: "progress", label: "Progress", get: (e) => e.progress, render: (e) => e.progress === null ? "" :
      el("span", {}, el("span", { class: "bar" }, el("span", { style: `width:${Math.round(e.progress * 100)}%` })), " " + Math.round(e.progress * 100) + "%") },
    { key: "best", label: "Best metric", get: (e) => e.best_metric, render: (e) => e.best_metric === null ? "" : fmt(e.best_metric) + " " + e.searcher_metric },
    { key: "trials", label: "Trials", get: (e) => e.num_trials },
    { key: "owner", label: "Owner", get: (e) => e.owner },
    { key: "searcher", label: "Searcher", get: (e) => e.searcher },
    { key: "created", label: "Created", get: (e) => e.created_at, render: (e) => pedl.when(e.created_at) },
  ];
  const table = new pedl.SortableTable($("experiments"), columns, { sortKey: "id", desc: true });

  function show() {
    const text = $("filter").value.trim().toLowerCase();
    const state = $("state-filter").value;
    const archived = $("show-archived").checked;
    const shown = rows.filter((e) => (!state || e.state === state) && (archived || !e.archived) &&
      (!text || [e.id, e.description, e.owner, e.searcher, ...(e.labels || [])].some((v) => String(v).toLowerCase().includes(text))));
    table.render(shown);
    $("status").textContent = shown.length + " of " + rows.length + " experiments";
  }
  for (const name of ["filter", "state-filter", "show-archived"]) $(name).addEventListener("input", show);
  poll(async () => { rows = (await api("/api/experiments")).experiments; show(); }, 3000,
    (error) => { $("status").textContent = error.message; });
})();
