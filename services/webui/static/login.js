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
    }),
  });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    error.textContent = body.error || "login failed";
    return;
  }
  const next = new URLSearchParams(location.search).get("next") || "/experiments";
  // Only a path on this site: never an open redirect.
  location.href = next.startsWith("/") && !next.startsWith("//") ? next : "/experiments";
});
