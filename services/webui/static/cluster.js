// The cluster page: agents, every slot and who holds it, the trials waiting for one, Slurm
// pools' pilot jobs, and the checkpoint GC tasks deleting checkpoints' files.
"use strict";

(async () => {
  const { api, el, poll } = pedl;
  const $ = (name) => document.getElementById(name);
  await pedl.setupNav();
  const trialLink = (id) => (id ? el("a", { href: "/trials/" + id, text: String(id) }) : "");
  const expLink = (id) => (id ? el("a", { href: "/experiments/" + id, text: String(id) }) : "");
  const agents = new pedl.SortableTable($("agents"), [
    { key: "id", label: "Agent", get: (a) => a.id },
    { key: "hostname", label: "Host", get: (a) => a.hostname },
    { key: "pool", label: "Pool", get: (a) => a.resource_pool },
    { key: "slots", label: "Slots", get: (a) => a.num_slots },
    { key: "used", label: "In use", get: (a) => a.used_slots },
    { key: "enabled", label: "Enabled", get: (a) => a.enabled },
    { key: "label", label: "Label", get: (a) => a.label },
    { key: "isolation", label: "Isolation", get: (a) => a.isolation },
  ], { sortKey: "id" });
  const slots = new pedl.SortableTable($("slots"), [
    { key: "agent", label: "Agent", get: (s) => s.agent_id },
    { key: "slot", label: "Slot", get: (s) => s.slot_id },
    { key: "type", label: "Type", get: (s) => s.type },
    { key: "trial", label: "Trial", get: (s) => s.trial_id, render: (s) => trialLink(s.trial_id) },
    { key: "experiment", label: "Experiment", get: (s) => s.experiment_id, render: (s) => expLink(s.experiment_id) },
    { key: "owner", label: "Owner", get: (s) => s.owner },
    { key: "enabled", label: "Enabled", get: (s) => s.enabled },
  ], { sortKey: "agent" });
  const queued = new pedl.SortableTable($("queued"), [
    { key: "trial", label: "Trial", get: (q) => q.trial_id, render: (q) => trialLink(q.trial_id) },
    { key: "experiment", label: "Experiment", get: (q) => q.experiment_id, render: (q) => expLink(q.experiment_id) },
    { key: "owner", label: "Owner", get: (q) => q.owner },
    { key: "batches", label: "Batches", get: (q) => q.total_batches },
  ], { sortKey: "trial" });
  // A Slurm pool's jobs, pending ones with Slurm's reason; their agents are slurm-<job>-<node>.
  const pilots = new pedl.SortableTable($("pilots"), [
    { key: "job", label: "Slurm job", get: (j) => j.job_id },
    { key: "pool", label: "Pool", get: (j) => j.resource_pool },
    { key: "partition", label: "Partition", get: (j) => j.partition },
    { key: "state", label: "State", get: (j) => j.state },
    { key: "reason", label: "Reason", get: (j) => (j.reason && j.reason !== "None" ? "(" + j.reason + ")" : "") },
    { key: "nodes", label: "Nodes", get: (j) => j.nodes },
    { key: "nodelist", label: "Node list", get: (j) => j.node_list },
    { key: "left", label: "Time left", get: (j) => j.time_left },
  ], { sortKey: "job" });
  // One per experiment whose checkpoints are being deleted, until their files are gone.
  const gcTasks = new pedl.SortableTable($("gc-tasks"), [
    { key: "name", label: "Task", get: (t) => t.name },
    { key: "experiment", label: "Experiment", get: (t) => t.experiment_id, render: (t) => expLink(t.experiment_id) },
    { key: "checkpoints", label: "Checkpoints", get: (t) => t.checkpoints },
    { key: "state", label: "State", get: (t) => t.state },
    { key: "started", label: "Started", get: (t) => t.started_at },
  ], { sortKey: "started" });
  poll(async () => {
    const view = await api("/api/cluster");
    agents.render(view.agents);
    slots.render(view.slots);
    queued.render(view.queued);
    $("pilots-section").hidden = !view.pilot_jobs.length;
    pilots.render(view.pilot_jobs);
    $("gc-section").hidden = !view.gc_tasks.length;
    gcTasks.render(view.gc_tasks);
  }, 3000);
})();
