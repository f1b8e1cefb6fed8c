// The experiments page: a page of experiments at a time (the scheduler filters and orders across
// every page), each with its state, progress and best metric; Previous/Next walk the pages.
"use strict";

(async () => {
  const { api, el, fmt, poll } = pedl;
  const $ = (name) => document.getElementById(name);
  await pedl.setupNav();
  const limit = Number(new URLSearchParams(location.search).get("limit")) || 50;
  // tokens[i] is the scheduler's token for page i ("" for the first); nextToken follows the shown page.
  let tokens = [""], index = 0, nextToken = "", rows = [], generation = 0;
  const columns = [
    { key: "id", label: "ID", get: (e) => e.id, render: (e) => el("a", { href: "/experiments/" + e.id, text: String(e.id) }) },
    { key: "name", label: "Name", get: (e) => e.name },
    { key: "description", label: "Description", get: (e) => e.description },
    // A failed experiment's row says why (the first failing trial's cause), in full on hover.
    { key: "state", label: "State", get: (e) => e.state, render: (e) => el("span", {}, el("span", { class: "state " + e.state, text: e.state }),
      e.error ? el("span", { class: "error row-error", title: e.error, text: " " + e.error.slice(0, 80) + (e.error.length > 80 ? "…" : "") }) : "") },
    { key: "progress", label: "Progress", get: (e) => e.progress, render: (e) => e.progress === null ? "" :
      el("span", {}, el("span", { class: "bar" }, el("span", { style: `width:${Math.round(e.progress * 100)}%` })), " " + Math.round(e.progress * 100) + "%") },
    { key: "best", label: "Best metric", get: (e) => e.best_metric, render: (e) => e.best_metric === null ? "" : fmt(e.best_metric) + " " + e.searcher_metric },
    { key: "trials", label: "Trials", get: (e) => e.num_trials },
    { key: "owner", label: "Owner", get: (e) => e.owner },
    { key: "searcher", label: "Searcher", get: (e) => e.searcher },
    { key: "created", label: "Created", get: (e) => e.created_at, render: (e) => pedl.when(e.created_at) },
  ];
  // ID and Created order every page (on the scheduler); other headers sort the page shown.
  const table = new pedl.SortableTable($("experiments"), columns, {
    sortKey: "id", desc: true, pageSize: limit,
    serverSort: { keys: ["id", "created"], onSort: (desc) => { $("order").value = desc ? "newest" : "oldest"; restart(); } },
  });

  function query() {
    const params = new URLSearchParams({ limit: String(limit), page: tokens[index], order: $("order").value });
    if ($("state-filter").value) params.set("state", $("state-filter").value);
    if ($("filter").value.trim()) params.set("q", $("filter").value.trim());
    if ($("show-archived").checked) params.set("archived", "1");
    return "/api/experiments?" + params;
  }

  function show() {
    if (table.serverSortKey()) table.desc = $("order").value === "newest";
    table.render(rows);
    const first = index * limit;
    $("status").textContent = rows.length ? `page ${index + 1} · ${rows.length} experiments` : (index ? `page ${index + 1} · no more experiments` : "no experiments");
    $("prev-page").disabled = index === 0;
    $("next-page").disabled = !nextToken;
    document.body.dataset.page = String(index + 1);
    document.body.dataset.first = String(first);
  }

  async function load() {
    const asked = generation;
    const page = await api(query());
    if (asked !== generation) return; // a filter or page changed meanwhile: that answer is shown instead
    rows = page.experiments;
    nextToken = page.next_page;
    show();
  }

  function restart() { tokens = [""]; index = 0; generation += 1; load().catch(fail); }
  function fail(error) { $("status").textContent = error.message; }
  $("next-page").addEventListener("click", () => {
    if (!nextToken) return;
    tokens = tokens.slice(0, index + 1).concat([nextToken]);
    index += 1; generation += 1; load().catch(fail);
  });
  $("prev-page").addEventListener("click", () => {
    if (index === 0) return;
    index -= 1; generation += 1; load().catch(fail);
  });
  let typing = null;
  $("filter").addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(restart, 300); });
  for (const name of ["state-filter", "show-archived", "order"]) $(name).addEventListener("input", restart);
  poll(load, 3000, fail);
})();
