// Loaded from the experiment page's <head>, before its stylesheets, the chart library and the page's
// other scripts: the summary, importance and who-am-I requests go out while those download and
// evaluate (uPlot's own start-up alone is ~0.1 s), not after. experiment.js awaits these answers.
"use strict";

pedl.started = (() => {
  const id = pedl.idFromPath();
  const quiet = (promise) => { promise.catch(() => {}); return promise; };  // errors show where awaited
  return {
    detail: quiet(pedl.api(`/api/experiments/${id}?columns=1`).then(pedl.trialRows)),
    importance: quiet(pedl.api(`/api/experiments/${id}/importance`)),
    me: quiet(pedl.api("/api/me")),
  };
})();
