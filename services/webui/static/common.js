// Shared by every page: the JSON API, safe DOM building (text only, never HTML), sortable tables, polling.
"use strict";

const pedl = (() => {
  async function api(path, options = {}) {
    const init = { credentials: "same-origin", headers: {} };
    if (options.method) init.method = options.method;
    if (options.body !== undefined) {
      init.body = JSON.stringify(options.body);
      init.headers["Content-Type"] = "application/json";
    }
    const response = await fetch(path, init);
    if (response.status === 401) {
      location.href = "/login?next=" + encodeURIComponent(location.pathname);
      throw new Error("not logged in");
    }
    const value = await response.json().catch(() => ({}));
    if (!response.ok) {
      const error = new Error(value.error || response.statusText);
      error.status = response.status;
      throw error;
    }
    return value;
  }

  // Elements from text only: children that are strings become text nodes (textContent semantics).
  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "text") node.textContent = String(value);
      else if (name === "class") node.className = value;
      else if (name === "style") node.style.cssText = value; // CSSOM: allowed under our CSP
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // One formatter for every integer: toLocaleString makes a new one each call, which cost the
  // page of a 1,000-trial search 0.4 s (its charts format each trial's hyperparameters).
  const INTEGER = new Intl.NumberFormat("en-US");
  function fmt(value) {
    if (value === null || value === undefined) return "";
    if (typeof value === "number") {
      if (Number.isInteger(value)) return INTEGER.format(value);
      const abs = Math.abs(value);
      return abs !== 0 && (abs < 1e-3 || abs >= 1e6) ? value.toExponential(4) : value.toPrecision(5);
    }
    if (typeof value === "boolean") return value ? "true" : "false";
    return String(value);
  }

  function when(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    return isNaN(d) ? iso : d.toLocaleString();
  }

  function compare(a, b) {
    const an = a === null || a === undefined || a === "", bn = b === null || b === undefined || b === "";
    if (an || bn) return an === bn ? 0 : an ? 1 : -1; // blanks last either way
    if (typeof a === "number" && typeof b === "number") return a - b;
    return String(a).localeCompare(String(b), undefined, { numeric: true });
  }

  // A table whose header cells sort it (all rows, then shown a page at a time: a 1,000-trial search
  // is 1,000 rows); keeps its sort and page across re-renders with fresh rows. With `serverSort`, the
  // headers named in its `keys` call its `onSort(desc)` too: the server orders every page by them.
  class SortableTable {
    constructor(container, columns, { sortKey = null, desc = false, pageSize = 100, serverSort = null } = {}) {
      this.container = container;
      this.columns = columns;
      this.sortKey = sortKey;
      this.desc = desc;
      this.pageSize = pageSize;
      this.serverSort = serverSort;
      this.page = 0;
      this.rows = [];
    }
    setColumns(columns) { this.columns = columns; }
    serverSortKey() { return this.serverSort && this.serverSort.keys.includes(this.sortKey) ? this.sortKey : null; }
    render(rows) {
      this.rows = rows;
      const column = this.columns.find((c) => c.key === this.sortKey);
      const sorted = column ? [...rows].sort((a, b) => {
        const order = compare(column.get(a), column.get(b));
        return this.desc ? -order : order;
      }) : rows;
      const head = el("tr", {}, this.columns.map((c) => {
        const th = el("th", { text: c.label, "data-key": c.key, title: "sort by " + c.label });
        if (c.key === this.sortKey) th.dataset.dir = this.desc ? "desc" : "asc";
        th.addEventListener("click", () => {
          this.desc = this.sortKey === c.key ? !this.desc : false;
          this.sortKey = c.key;
          this.page = 0;
          this.render(this.rows);
          if (this.serverSortKey()) this.serverSort.onSort(this.desc);
        });
        return th;
      }));
      const pages = Math.max(1, Math.ceil(sorted.length / this.pageSize));
      this.page = Math.min(this.page, pages - 1);
      const first = this.page * this.pageSize;
      const shown = sorted.slice(first, first + this.pageSize);
      const body = shown.map((row) => el("tr", { "data-id": row.id }, this.columns.map((c) => {
        const value = c.get(row);
        const content = c.render ? c.render(row) : fmt(value);
        return el("td", { class: typeof value === "number" ? "num" : "" }, content);
      })));
      const table = el("table", {}, el("thead", {}, head), el("tbody", {}, body));
      const turn = (delta) => () => { this.page += delta; this.render(this.rows); };
      const pager = pages > 1 ? el("div", { class: "toolbar pager" },
        el("button", { type: "button", class: "prev", disabled: this.page === 0, onclick: turn(-1) }, "Previous"),
        el("span", { class: "muted", text: `rows ${first + 1}-${first + shown.length} of ${sorted.length}` }),
        el("button", { type: "button", class: "next", disabled: this.page >= pages - 1, onclick: turn(1) }, "Next")) : null;
      this.container.replaceChildren(el("div", { class: "table-wrap" }, table), ...(pager ? [pager] : []));
    }
  }

  // Calls fn now and every `ms` while the tab is visible; a failing call is shown, not fatal.
  function poll(fn, ms, onError = console.error) {
    let timer = null;
    async function tick() {
      if (!document.hidden) {
        try { await fn(); } catch (error) { onError(error); }
      }
      timer = setTimeout(tick, ms);
    }
    tick();
    return () => clearTimeout(timer);
  }

  // A Server-Sent Events stream of JSON events; reopened (and `reset` called) if the link drops.
  function follow(path, { onData, onEnd = () => {}, onReset = () => {}, onFailure = console.error }) {
    let source = null, ended = false, opened = false;
    function open() {
      source = new EventSource(path);
      source.onopen = () => { if (opened) onReset(); opened = true; };
      source.onmessage = (event) => onData(JSON.parse(event.data));
      source.addEventListener("end", () => { ended = true; source.close(); onEnd(); });
      source.addEventListener("failure", (event) => { ended = true; source.close(); onFailure(JSON.parse(event.data)); });
      source.onerror = () => {
        if (ended) return;
        if (source.readyState === EventSource.CLOSED) setTimeout(open, 2000);
      };
    }
    open();
    return () => { ended = true; source.close(); };
  }

  // `me`: the /api/me answer when the page asked for it already (experiment_start.js).
  async function setupNav(me = null) {
    const box = document.getElementById("me");
    const logout = document.getElementById("logout");
    if (logout) logout.addEventListener("click", async () => {
      await api("/api/logout", { method: "POST", body: {} }).catch(() => {});
      location.href = "/login";
    });
    if (box) {
      const user = await (me || api("/api/me"));
      box.textContent = user.username + (user.admin ? " (admin)" : "");
      return user;
    }
    return null;
  }

  // An experiment's data asked for with ?columns=1 (trial_columns.py), its `trials` rows again:
  // the page reads trial objects, the wire carries each field's name once, not once per trial.
  function trialRows(detail) {
    const { count, fields, hparams, absent } = detail.trial_columns;
    const trials = [];
    for (let i = 0; i < count; i++) {
      const trial = {}, values = {};
      for (const name in fields) trial[name] = fields[name][i];
      for (const name in hparams) values[name] = hparams[name][i];
      trial.hparams = values;
      trials.push(trial);
    }
    for (const name in absent) for (const i of absent[name]) delete trials[i].hparams[name];
    const rows = { ...detail, trials };
    delete rows.trial_columns;
    return rows;
  }

  function idFromPath() {
    return Number(location.pathname.split("/").filter(Boolean).pop());
  }

  function stateBadge(node, state) {
    node.textContent = state;
    node.className = "state " + state;
  }

  return { api, el, fmt, when, compare, SortableTable, poll, follow, setupNav, trialRows, idFromPath, stateBadge };
})();
