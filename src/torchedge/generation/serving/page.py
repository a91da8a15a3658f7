"""The chat page `torchedge serve` answers ``GET /`` with: one static HTML file, its script inline (no
build step, nothing loaded from elsewhere). It streams replies from ``/v1/chat/completions``."""

from __future__ import annotations

__all__ = ["CHAT_PAGE"]

CHAT_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>torchedge serve: {{MODEL}}</title>
<style>
  body { font: 15px/1.45 system-ui, sans-serif; max-width: 46rem; margin: 0 auto; padding: 1rem; color: #222; }
  h1 { font-size: 1.1rem; font-weight: 600; }
  #log { border: 1px solid #ccc; border-radius: 6px; padding: .5rem .75rem; min-height: 12rem; }
  .msg { white-space: pre-wrap; margin: .4rem 0; }
  .user::before { content: "you: "; font-weight: 600; }
  .assistant::before { content: "model: "; font-weight: 600; color: #1a5fb4; }
  .error { color: #b00020; }
  form { display: flex; gap: .5rem; margin-top: .75rem; }
  #prompt { flex: 1; padding: .4rem; }
  .settings { margin-top: .5rem; font-size: .85rem; color: #555; }
  .settings input { width: 4.5rem; }
</style>
</head>
<body>
<h1>torchedge serve: <span id="model">{{MODEL}}</span></h1>
<div id="log" aria-live="polite"></div>
<form id="form">
  <input id="prompt" autocomplete="off" placeholder="Say something" required>
  <button id="send" type="submit">Send</button>
  <button id="stop" type="button" disabled>Stop</button>
  <button id="clear" type="button">Clear</button>
</form>
<div class="settings">
  <label>temperature <input id="temperature" type="number" min="0" max="2" step="0.1" value="0"></label>
  <label>max tokens <input id="max_tokens" type="number" min="1" step="1" value="64"></label>
  <label>seed <input id="seed" type="number" min="0" step="1" placeholder="none"></label>
</div>
<script>
"use strict";
const model = document.getElementById("model").textContent;
const log = document.getElementById("log");
const form = document.getElementById("form");
const prompt = document.getElementById("prompt");
const sendButton = document.getElementById("send");
const stopButton = document.getElementById("stop");
let messages = [];
let controller = null;

function add(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  log.appendChild(div);
  return div;
}

function settings() {
  const body = {
    model: model,
    messages: messages,
    stream: true,
    temperature: Number(document.getElementById("temperature").value || 0),
    max_tokens: Number(document.getElementById("max_tokens").value || 64),
  };
  const seed = document.getElementById("seed").value;
  if (seed !== "") body.seed = Number(seed);
  return body;
}

async function send(text) {
  messages.push({ role: "user", content: text });
  add("user", text);
  const reply = add("assistant", "");
  controller = new AbortController();
  sendButton.disabled = true;
  stopButton.disabled = false;
  let answer = "";
  try {
    const response = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(settings()),
      signal: controller.signal,
    });
    if (!response.ok) {
      const error = await response.json().catch(() => ({ error: { message: response.statusText } }));
      throw new Error(error.error.message);
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\\n\\n")) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        for (const line of event.split("\\n")) {
          if (!line.startsWith("data: ")) continue;
          const data = line.slice(6);
          if (data === "[DONE]") continue;
          const chunk = JSON.parse(data);
          if (chunk.error) throw new Error(chunk.error.message);
          for (const choice of chunk.choices) {
            if (choice.delta && choice.delta.content) {
              answer += choice.delta.content;
              reply.textContent = answer;
            }
          }
        }
      }
    }
    messages.push({ role: "assistant", content: answer });
    reply.dataset.done = "true";
  } catch (error) {
    if (error.name !== "AbortError") {
      reply.classList.add("error");
      reply.textContent = answer + " [error: " + error.message + "]";
    }
    messages.push({ role: "assistant", content: answer });
    reply.dataset.done = "true";
  } finally {
    controller = null;
    sendButton.disabled = false;
    stopButton.disabled = true;
  }
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = prompt.value.trim();
  if (!text || controller) return;
  prompt.value = "";
  send(text);
});
stopButton.addEventListener("click", () => controller && controller.abort());
document.getElementById("clear").addEventListener("click", () => {
  messages = [];
  log.textContent = "";
});
</script>
</body>
</html>
"""
