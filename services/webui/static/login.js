"use strict";
document.getElementById("login").addEventListener("submit", async (event) => {
  event.preventDefault();
  const error = document.getElementById("error");
  error.textContent = "";
  const response = await fetch("/api/login", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      username: document.getElementById("username").value,
      password: document.getElementById("password").value,
      next: new URLSearchParams(location.search).get("next") || "",
    }),
  });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    error.textContent = body.error || "login failed";
    return;
  }
  // The server's answer: a path on this site only (services/webui/redirects.py), never an open redirect.
  const body = await response.json().catch(() => ({}));
  location.href = body.next || "/experiments";
});
