// plangate web UI: an AG-UI client with a live plan panel, approval cards and a governance
// timeline. No framework and no build step; every string from the server is escaped
// before it reaches the DOM (text nodes, or the small Markdown renderer below).
"use strict";

(() => {
  // ---------------------------------------------------------------- small helpers

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key === "html") node.innerHTML = value; // only ever output of markdown()/inline()
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function randomId(prefix) {
    const bytes = new Uint8Array(8);
    crypto.getRandomValues(bytes);
    return prefix + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function escapeHtml(text) {
    return String(text)
      .replace(/&/g, "&amp;")
      .replace(/</g, "&lt;")
      .replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;")
      .replace(/'/g, "&#39;");
  }

  function parseJson(text) {
    try {
      return JSON.parse(text);
    } catch {
      return undefined;
    }
  }

  function clock(seconds) {
    const d = new Date(seconds * 1000);
    return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" });
  }

  function shortHash(hash) {
    return hash ? hash.slice(0, 10) : "";
  }

  function truncate(text, n) {
    text = String(text ?? "");
    return text.length > n ? text.slice(0, n - 1) + "…" : text;
  }

  // ---------------------------------------------------------------- Markdown (safe subset)
  // Everything is escaped first; only the tags produced here reach innerHTML.

  function inline(text) {
    let out = escapeHtml(text);
    const codes = [];
    out = out.replace(/`([^`]+)`/g, (_, code) => {
      codes.push(code);
      return `\u0000${codes.length - 1}\u0000`;
    });
    out = out
      .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
      .replace(/(^|[^*\w])\*([^*\s][^*]*)\*/g, "$1<em>$2</em>")
      .replace(/(^|[^\w])_([^_\s][^_]*)_(?!\w)/g, "$1<em>$2</em>")
      .replace(
        /\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g,
        '<a href="$2" target="_blank" rel="noopener noreferrer">$1</a>'
      );
    return out.replace(/\u0000(\d+)\u0000/g, (_, i) => `<code>${codes[Number(i)]}</code>`);
  }

  function markdown(source) {
    const lines = String(source || "").replace(/\r\n?/g, "\n").split("\n");
    const html = [];
    let i = 0;
    let paragraph = [];
    const flush = () => {
      if (paragraph.length) html.push(`<p>${paragraph.map((l) => inline(l.trim())).join(" ")}</p>`);
      paragraph = [];
    };
    while (i < lines.length) {
      const line = lines[i];
      const fence = line.match(/^\s*```/);
      if (fence) {
        flush();
        const body = [];
        i += 1;
        while (i < lines.length && !/^\s*```/.test(lines[i])) body.push(lines[i++]);
        i += 1;
        html.push(`<pre><code>${escapeHtml(body.join("\n"))}</code></pre>`);
        continue;
      }
      const heading = line.match(/^(#{1,6})\s+(.*)$/);
      if (heading) {
        flush();
        const level = Math.min(heading[1].length + 2, 6); // h3.. inside panels
        html.push(`<h${level}>${inline(heading[2])}</h${level}>`);
        i += 1;
        continue;
      }
      if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
        flush();
        html.push("<hr>");
        i += 1;
        continue;
      }
      const item = line.match(/^\s*([-*+]|\d+[.)])\s+(.*)$/);
      if (item) {
        flush();
        const ordered = /\d/.test(item[1]);
        const tag = ordered ? "ol" : "ul";
        const items = [];
        while (i < lines.length) {
          const m = lines[i].match(/^\s*([-*+]|\d+[.)])\s+(.*)$/);
          if (!m || /\d/.test(m[1]) !== ordered) break;
          let text = m[2];
          let box = "";
          const task = text.match(/^\[([ xX])\]\s+(.*)$/);
          if (task) {
            box = task[1].trim() ? "☑ " : "☐ ";
            text = task[2];
          }
          items.push(`<li>${box}${inline(text)}</li>`);
          i += 1;
        }
        const start = ordered ? parseInt(item[1], 10) : 1;
        const startAttr = ordered && start !== 1 ? ` start="${start}"` : "";
        html.push(`<${tag}${startAttr}>${items.join("")}</${tag}>`);
        continue;
      }
      const quote = line.match(/^\s*>\s?(.*)$/);
      if (quote) {
        flush();
        const body = [];
        while (i < lines.length && /^\s*>/.test(lines[i])) {
          body.push(lines[i].replace(/^\s*>\s?/, ""));
          i += 1;
        }
        html.push(`<blockquote>${body.map(inline).join("<br>")}</blockquote>`);
        continue;
      }
      if (!line.trim()) {
        flush();
        i += 1;
        continue;
      }
      paragraph.push(line);
      i += 1;
    }
    flush();
    return html.join("\n");
  }

  // ---------------------------------------------------------------- line diff (LCS)

  function diffLines(before, after) {
    const a = String(before || "").split("\n");
    const b = String(after || "").split("\n");
    if (a.length * b.length > 4_000_000) {
      return [...a.map((t) => ({ op: "del", text: t })), ...b.map((t) => ({ op: "add", text: t }))];
    }
    const n = a.length;
    const m = b.length;
    const table = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
    for (let x = n - 1; x >= 0; x--) {
      for (let y = m - 1; y >= 0; y--) {
        table[x][y] = a[x] === b[y] ? table[x + 1][y + 1] + 1 : Math.max(table[x + 1][y], table[x][y + 1]);
      }
    }
    const out = [];
    let x = 0;
    let y = 0;
    while (x < n && y < m) {
      if (a[x] === b[y]) {
        out.push({ op: "ctx", text: a[x] });
        x++;
        y++;
      } else if (table[x + 1][y] >= table[x][y + 1]) {
        out.push({ op: "del", text: a[x++] });
      } else {
        out.push({ op: "add", text: b[y++] });
      }
    }
    while (x < n) out.push({ op: "del", text: a[x++] });
    while (y < m) out.push({ op: "add", text: b[y++] });
    return out;
  }

  // Changed lines with a little context; long unchanged stretches fold into one line.
  function renderDiff(before, after, context = 2) {
    const rows = diffLines(before, after);
    const box = el("div", { class: "diff", role: "region", "aria-label": "Changes" });
    const changed = rows.map((r) => r.op !== "ctx");
    if (!changed.some(Boolean)) {
      box.append(el("div", { class: "diff-none", text: "No changes." }));
      return box;
    }
    const near = rows.map((_, i) => changed.slice(Math.max(0, i - context), i + context + 1).some(Boolean));
    let folded = 0;
    const fold = () => {
      if (folded) box.append(el("div", { class: "diff-fold", text: `⋯ ${folded} unchanged line${folded > 1 ? "s" : ""}` }));
      folded = 0;
    };
    rows.forEach((row, i) => {
      if (!near[i]) {
        folded += 1;
        return;
      }
      fold();
      const sign = row.op === "add" ? "+" : row.op === "del" ? "−" : " ";
      box.append(el("div", { class: `diff-line ${row.op}` }, el("span", { class: "diff-sign", text: sign }), row.text || " "));
    });
    fold();
    return box;
  }

  // ---------------------------------------------------------------- JSON Patch (RFC 6902)

  function pointer(path) {
    if (path === "") return [];
    if (path[0] !== "/") throw new Error(`bad JSON pointer ${path}`);
    return path
      .slice(1)
      .split("/")
      .map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
  }

  function walk(doc, tokens) {
    let node = doc;
    for (const token of tokens) {
      if (node === null || typeof node !== "object") throw new Error("path not found");
      node = Array.isArray(node) ? node[Number(token)] : node[token];
    }
    return node;
  }

  function applyPatch(doc, ops) {
    let root = structuredClone(doc);
    const get = (path) => walk(root, pointer(path));
    const put = (path, value, replace) => {
      const tokens = pointer(path);
      if (!tokens.length) {
        root = value;
        return;
      }
      const key = tokens.pop();
      const parent = walk(root, tokens);
      if (Array.isArray(parent)) {
        const index = key === "-" ? parent.length : Number(key);
        if (replace) parent[index] = value;
        else parent.splice(index, 0, value);
      } else {
        parent[key] = value;
      }
    };
    const remove = (path) => {
      const tokens = pointer(path);
      const key = tokens.pop();
      const parent = walk(root, tokens);
      const old = Array.isArray(parent) ? parent[Number(key)] : parent[key];
      if (Array.isArray(parent)) parent.splice(Number(key), 1);
      else delete parent[key];
      return old;
    };
    for (const op of ops) {
      switch (op.op) {
        case "add":
          put(op.path, structuredClone(op.value), false);
          break;
        case "replace":
          put(op.path, structuredClone(op.value), true);
          break;
        case "remove":
          remove(op.path);
          break;
        case "move":
          put(op.path, remove(op.from), false);
          break;
        case "copy":
          put(op.path, structuredClone(get(op.from)), false);
          break;
        case "test":
          if (JSON.stringify(get(op.path)) !== JSON.stringify(op.value)) throw new Error("patch test failed");
          break;
        default:
          throw new Error(`unknown patch op ${op.op}`);
      }
    }
    return root;
  }

  // ---------------------------------------------------------------- app state

  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get("token")) sessionStorage.setItem("plangate.token", hash.get("token"));
  const S = {
    token: sessionStorage.getItem("plangate.token") || "",
    threadId: hash.get("thread") || localStorage.getItem("plangate.thread") || randomId("t-"),
    keys: { plan: null, todos: null, selection: "agent_mode", protocol: null },
    state: {},
    selection: null, // the user's choice, sent with the next run; null = keep the thread's
    interrupts: [],
    running: false,
    tools: new Map(), // tool call id -> {node, name, args}
    bubbles: new Map(), // message id -> {node, text}
    journal: [],
    loading: true,
  };
  window.__events = [];

  function remember() {
    localStorage.setItem("plangate.thread", S.threadId);
    history.replaceState(null, "", `#thread=${encodeURIComponent(S.threadId)}`);
    $("thread-info").textContent = `thread ${S.threadId}`;
    $("thread-info").title = "Conversation id (an ADK session); reloading the page restores it";
  }

  function planKey() {
    return S.keys.plan || Object.keys(S.state).find((k) => k === "plan" || k.startsWith("plan:"));
  }

  function todosKey() {
    return S.keys.todos || Object.keys(S.state).find((k) => k === "todos" || k.startsWith("todos:"));
  }

  function plan() {
    const value = S.state[planKey()];
    return typeof value === "string" ? parseJson(value) : value || null;
  }

  function protocolKey() {
    return S.keys.protocol || Object.keys(S.state).find((k) => k.startsWith("protocol:"));
  }

  // The protocol mirror: {protocol, version, phase, run_id, run_status, intent, handoffs, route, …}.
  function protocolState() {
    const key = protocolKey();
    const value = key ? S.state[key] : null;
    return typeof value === "string" ? parseJson(value) : value || null;
  }

  function threadSelection() {
    return S.state[S.keys.selection] || "agent";
  }

  function selection() {
    return S.selection || threadSelection();
  }

  function planActive() {
    const record = plan();
    return Boolean(record && record.gateActive);
  }

  // ---------------------------------------------------------------- server access

  function headers(extra) {
    const h = { ...(extra || {}) };
    if (S.token) h.Authorization = `Bearer ${S.token}`;
    return h;
  }

  async function getJson(path) {
    const response = await fetch(path, { headers: headers(), cache: "no-store" });
    const body = await response.json().catch(() => ({}));
    return { status: response.status, ok: response.ok, body };
  }

  function showBanner(text, kind) {
    const banner = $("banner");
    banner.replaceChildren(
      el("span", { text }),
      el("button", { type: "button", class: "ghost small", onclick: () => (banner.hidden = true), text: "Dismiss" })
    );
    banner.className = `banner ${kind || "error"}`;
    banner.hidden = false;
  }

  function hideBanner() {
    $("banner").hidden = true;
  }

  function authProblem(status) {
    if (status === 401) {
      showBanner("This server needs a token: open the full URL printed by “plangate serve” (it ends with #token=…).");
      return true;
    }
    return false;
  }

  // ---------------------------------------------------------------- chat rendering

  // Follow new output while the reader is at the bottom. "At the bottom" is decided when
  // the reader scrolls, not after new content has already pushed the bottom away.
  let following = true;

  function scrollDown(force) {
    const box = $("messages");
    if (force || following) box.scrollTop = box.scrollHeight;
  }

  function trackScroll() {
    const box = $("messages");
    box.addEventListener("scroll", () => {
      following = box.scrollHeight - box.scrollTop - box.clientHeight < 160;
    });
  }

  function addUserBubble(text) {
    $("empty").hidden = true;
    $("messages").append(el("div", { class: "msg user" }, el("div", { class: "bubble", text })));
    scrollDown(true);
  }

  // Tool calls without text of their own (one model step each) join the assistant bubble
  // right above them instead of opening one bubble per call.
  function assistantBubble(id, toolsOnly) {
    let entry = S.bubbles.get(id);
    if (entry) return entry;
    const last = $("messages").lastElementChild;
    if (toolsOnly && last && last.classList.contains("assistant")) {
      entry = [...S.bubbles.values()].find((e) => e.node === last);
      if (entry) {
        S.bubbles.set(id, entry);
        return entry;
      }
    }
    $("empty").hidden = true;
    const body = el("div", { class: "markdown text" });
    const tools = el("div", { class: "tools" });
    const node = el("div", { class: "msg assistant", "data-id": id }, el("div", { class: "bubble" }, body, tools));
    $("messages").append(node);
    entry = { node, body, tools, text: "" };
    S.bubbles.set(id, entry);
    return entry;
  }

  function setBubbleText(entry, text) {
    entry.text = text;
    entry.body.innerHTML = markdown(text);
    entry.body.hidden = !text;
    scrollDown();
  }

  const ARG_KEYS = ["path", "command", "pattern", "question", "summary", "objective", "mode", "target_protocol", "sql", "claim"];
  const HITL = new Set(["enter_plan_mode", "exit_plan_mode", "ask_user_question"]);
  // Tools whose successful result is worth a line in the chat without opening the details.
  const SHOW_OK = new Set([...HITL, "Bash", "Edit", "Write", "todo_write", "update_plan_content", "protocol_handoff", "run_sql_readonly"]);

  function argSummary(name, args) {
    if (!args || typeof args !== "object") return "";
    if (name === "todo_write" && Array.isArray(args.todos)) return `${args.todos.length} items`;
    if (name === "update_plan_content") return `${args.mode || "append"}, ${String(args.content || "").length} chars`;
    if (name === "validate_result" && args.result && Array.isArray(args.result.rows)) return `${args.result.rows.length} rows`;
    if (!Object.keys(args).length) return "";
    for (const key of ARG_KEYS) if (args[key]) return truncate(args[key], 90);
    return truncate(JSON.stringify(args), 90);
  }

  // ACTION_NOT_ALLOWED_IN_PHASE:<phase>:<action>:<allowed,…> from the protocol boundary check.
  function protocolRefusal(name, result, error) {
    const [code, phase, action] = error.split(":");
    const targets = Array.isArray(result.handoff_targets) ? result.handoff_targets : [];
    if (code !== "ACTION_NOT_ALLOWED_IN_PHASE") return truncate(error, 200);
    let text = `${action || name} is not allowed in phase “${phase}”`;
    if (targets.length) text += ` — it needs ${targets.join(" or ")} (a handoff)`;
    return text;
  }

  function resultSummary(name, result) {
    if (result === undefined) return { kind: "ok", text: "done" };
    if (result && typeof result === "object") {
      const error = typeof result.error === "string" ? result.error : "";
      if (error.startsWith("PLAN_MODE_GATE")) return { kind: "refused", text: error.replace(/^PLAN_MODE_GATE:\s*/, "") };
      if (error.startsWith("ACTION_NOT_ALLOWED_IN_PHASE") || (error && result.error_category === "protocol")) {
        return { kind: "refused", by: "protocol", text: protocolRefusal(name, result, error) };
      }
      if (result.status === "ignored") return { kind: "ignored", text: error || "ignored" };
      if (error) return { kind: "error", text: error };
      if (result.status === "waiting") return { kind: "waiting", text: "still waiting for you" };
      if (result.status === "cancelled") return { kind: "withdrawn", text: result.message || "withdrawn" };
      if (result.status === "rejected") return { kind: "rejected", text: result.reviewer_note ? `rejected: ${result.reviewer_note}` : "rejected" };
      if (result.status === "approved") return { kind: "ok", text: truncate(result.message || "approved", 160) };
      if (result.status === "answered") return { kind: "ok", text: `answered: ${result.answer}` };
      if (name === "Bash") {
        const out = String(result.stdout || result.stderr || "").trim().split("\n").filter(Boolean);
        const last = out.length ? out[out.length - 1] : "";
        const kind = result.exit_code === 0 ? "ok" : "error";
        return { kind, text: `exit ${result.exit_code}${last ? " · " + truncate(last, 120) : ""}` };
      }
      if (name === "Edit" && "replacements" in result) return { kind: "ok", text: `${result.replacements} replacement(s) in ${result.path}` };
      if (name === "Write" && "bytes_written" in result) return { kind: "ok", text: `${result.bytes_written} bytes written` };
      if (name === "Read" && "total_lines" in result) return { kind: "ok", text: `${result.total_lines} lines` };
      if (name === "Glob" && Array.isArray(result.paths)) return { kind: "ok", text: `${result.paths.length} files` };
      if (name === "Grep" && Array.isArray(result.matches)) return { kind: "ok", text: `${result.matches.length} matches` };
      if (name === "protocol_handoff" && result.status === "accepted") return { kind: "ok", text: `now ${result.active_protocol}, phase ${result.active_phase}` };
      if (name === "list_data_sources" && Array.isArray(result.sources)) return { kind: "ok", text: result.sources.map((s) => s.name).join(", ") || "no sources" };
      if (name === "run_sql_readonly" && "row_count" in result) return { kind: "ok", text: `${result.row_count} rows${result.truncated ? " (truncated)" : ""}` };
      if (name === "validate_result" && "valid" in result) return { kind: result.valid ? "ok" : "error", text: result.valid ? "valid" : `issues: ${(result.issues || []).join("; ")}` };
      if (name === "bind_evidence" && result.evidence_id) return { kind: "ok", text: `evidence ${result.evidence_id}` };
      if (result.message) return { kind: "ok", text: truncate(result.message, 160) };
    }
    return { kind: "ok", text: "done" };
  }

  const STATUS_LABEL = {
    running: "running…",
    ok: "ok",
    error: "error",
    refused: "refused by plan gate",
    "refused-protocol": "refused by protocol",
    waiting: "waiting for you",
    ignored: "ignored",
    withdrawn: "withdrawn",
    rejected: "rejected",
  };

  function toolBlock(id, name, parentId) {
    let tool = S.tools.get(id);
    if (tool) return tool;
    const bubble = assistantBubble(parentId || `tool-${id}`, true);
    const status = el("span", { class: "tool-status", text: STATUS_LABEL.running });
    const args = el("code", { class: "tool-args" });
    const note = el("div", { class: "tool-note", hidden: true });
    const argsPre = el("pre", { class: "tool-json" });
    const resultPre = el("pre", { class: "tool-json" });
    const details = el(
      "details",
      { class: "tool-details" },
      el("summary", { text: "details" }),
      el("div", { class: "tool-label", text: "arguments" }),
      argsPre,
      el("div", { class: "tool-label", text: "result" }),
      resultPre
    );
    const node = el(
      "div",
      { class: "tool running", "data-call-id": id, "data-tool": name },
      el("div", { class: "tool-head" }, el("span", { class: "tool-name", text: name }), args, status),
      note,
      details
    );
    bubble.tools.append(node);
    tool = { id, name, node, status, args, note, argsPre, resultPre, argText: "" };
    S.tools.set(id, tool);
    if (HITL.has(name)) setToolState(tool, "waiting", "");
    scrollDown();
    return tool;
  }

  function setToolArgs(tool, text) {
    tool.argText = text;
    const args = parseJson(text);
    tool.args.textContent = argSummary(tool.name, args);
    tool.argsPre.textContent = args === undefined ? text : JSON.stringify(args, null, 2);
  }

  function setToolState(tool, kind, text, by) {
    tool.node.className = `tool ${kind}${by ? ` by-${by}` : ""}`;
    tool.status.textContent = STATUS_LABEL[by ? `${kind}-${by}` : kind] || kind;
    tool.note.textContent = text || "";
    tool.note.hidden = !text;
  }

  function setToolResult(callId, content, name) {
    const tool = S.tools.get(callId) || toolBlock(callId, name || "tool", null);
    const result = parseJson(content);
    tool.resultPre.textContent = result === undefined ? String(content) : JSON.stringify(result, null, 2);
    const summary = resultSummary(tool.name, result === undefined ? content : result);
    const quiet = summary.kind === "ok" && !SHOW_OK.has(tool.name);
    setToolState(tool, summary.kind, quiet ? "" : summary.text, summary.by);
    scrollDown();
  }

  function decisionText(result, toolName) {
    if (!result || typeof result !== "object") return "Replied";
    if (result.status === "ignored") return `Reply ignored — ${result.error || ""}`;
    if (result.status === "cancelled") return "Left Plan mode — request withdrawn";
    if (toolName === "ask_user_question" || result.status === "answered") return `Answered: ${result.answer}`;
    if (toolName === "enter_plan_mode") return result.status === "approved" ? "Confirmed Plan mode" : "Declined Plan mode";
    const revision = result.plan && result.plan.contentRevisions;
    if (result.status === "approved") {
      const edited = /reviewer's edits/.test(result.message || "") ? " with edits" : "";
      return `Approved the plan (revision ${revision})${edited}`;
    }
    if (result.status === "rejected") return `Rejected revision ${revision}${result.reviewer_note ? `: ${result.reviewer_note}` : ""}`;
    return result.status || "Replied";
  }

  function addDecision(callId, content) {
    const result = parseJson(content);
    const tool = S.tools.get(callId);
    $("messages").append(
      el("div", { class: "msg user decision" }, el("div", { class: "bubble", text: decisionText(result, tool && tool.name) }))
    );
    scrollDown(true);
  }

  function renderMessages(messages) {
    for (const message of messages) {
      if (message.role === "user") {
        addUserBubble(typeof message.content === "string" ? message.content : "");
      } else if (message.role === "assistant") {
        const bubble = assistantBubble(message.id, !message.content);
        if (message.content) setBubbleText(bubble, message.content);
        for (const call of message.toolCalls || []) {
          const tool = toolBlock(call.id, call.function.name, message.id);
          setToolArgs(tool, call.function.arguments);
        }
      } else if (message.role === "tool") {
        if (message.id.startsWith("reply:")) addDecision(message.toolCallId, message.content);
        setToolResult(message.toolCallId, message.content);
      }
    }
  }

  // ---------------------------------------------------------------- side panels

  const STATUS_TEXT = {
    pending_enter: "waiting for you to confirm",
    exploring: "exploring (read-only)",
    drafting: "drafting",
    pending_approval: "waiting for your approval",
    approved: "approved",
    cancelled: "cancelled",
  };

  function renderPlan() {
    const record = plan();
    const status = $("plan-status");
    const meta = $("plan-meta");
    const body = $("plan-body");
    $("plan-panel").classList.toggle("empty", !record);
    if (!record) {
      status.textContent = "no plan";
      status.className = "badge";
      meta.replaceChildren();
      body.innerHTML = "";
      body.append(
        el(
          "p",
          { class: "placeholder" },
          "No plan yet. In Plan mode the agent explores read-only, drafts its plan here while it works, and waits for your approval before changing anything."
        )
      );
      return;
    }
    status.textContent = STATUS_TEXT[record.status] || record.status;
    status.className = `badge status-${record.status}`;
    const rows = [el("div", { class: "objective" }, el("span", { class: "label", text: "Objective" }), record.objective)];
    const facts = [];
    if (record.contentRevisions) facts.push(`revision ${record.contentRevisions}`);
    if (record.sha256 && record.content) facts.push(el("span", { class: "mono", title: `sha256 ${record.sha256}`, text: `sha256 ${shortHash(record.sha256)}` }));
    if (record.updatedAt) facts.push(`updated ${clock(record.updatedAt)}`);
    facts.push(record.gateActive ? el("span", { class: "gate on", text: "gate on: writes blocked" }) : el("span", { class: "gate off", text: "gate off" }));
    const factRow = el("div", { class: "facts" });
    facts.forEach((f, i) => {
      if (i) factRow.append(el("span", { class: "dot", text: "·" }));
      factRow.append(f);
    });
    rows.push(factRow);
    if (record.reviewerNote) rows.push(el("div", { class: "reviewer-note" }, el("span", { class: "label", text: "Reviewer note" }), record.reviewerNote));
    meta.replaceChildren(...rows);
    if (record.content) {
      body.innerHTML = markdown(record.content);
    } else {
      body.replaceChildren(el("p", { class: "placeholder", text: "The plan is still empty: the agent is exploring." }));
    }
  }

  function renderTodos() {
    const todos = S.state[todosKey()] || [];
    const list = $("todos");
    list.replaceChildren(
      ...todos.map((t) =>
        el("li", { class: `todo ${t.status}` }, el("span", { class: "todo-mark", "aria-hidden": "true" }), el("span", { class: "todo-text", html: inline(t.content) }), el("span", { class: "sr-only", text: ` (${t.status})` }))
      )
    );
    if (!todos.length) list.append(el("li", { class: "placeholder", text: "The agent tracks the approved plan's steps here." }));
    const done = todos.filter((t) => t.status === "completed").length;
    $("todo-count").textContent = todos.length ? `${done}/${todos.length} done` : "";
  }

  function renderMode() {
    // An active plan shows as Plan, however it was entered (selected, or asked by the agent).
    const current = planActive() && !S.selection ? "plan" : selection();
    for (const button of document.querySelectorAll(".toggle button")) {
      button.setAttribute("aria-pressed", String(button.dataset.mode === current));
    }
    const record = plan();
    const active = record && record.gateActive;
    let note = "";
    if (S.selection && S.selection !== threadSelection()) {
      note = S.selection === "plan" ? "Plan mode starts with your next message" : "Agent mode from your next message";
    } else if (record && record.status === "pending_enter") {
      note = "The agent asks to plan first; writes are blocked until you decide";
    } else if (active) {
      note = "Plan mode: only read-only tools run";
    }
    $("mode-note").textContent = note;
  }

  const RUN_TEXT = { running: "running", completed: "completed", failed: "failed", degraded: "degraded", partial: "partial", interrupted: "interrupted" };

  function words(text) {
    return String(text || "").replace(/_/g, " ");
  }

  function protocolName(name) {
    return String(name || "").replace(/@\d+$/, "");
  }

  // Handoffs accepted in earlier runs, from the journal (the state holds this run's only).
  function earlierHandoffs(runId) {
    const out = [];
    let proposed = null;
    for (const entry of S.journal) {
      if (entry.kind === "protocol.handoff.proposed") proposed = entry.detail || {};
      if (entry.kind !== "protocol.handoff.accepted") continue;
      const run = String(entry.subject || "").split(":segment:")[0];
      if (run === runId) continue;
      const d = entry.detail || {};
      out.push({ from: proposed ? proposed.sourceProtocol : "?", to: d.protocol, kind: d.transitionKind, at: entry.at });
    }
    return out;
  }

  function factRow(label, ...value) {
    return el("div", { class: "proto-row" }, el("span", { class: "label", text: label }), el("span", { class: "value" }, ...value));
  }

  function handoffItem(h, earlier) {
    const kind = h.kind && h.kind !== "handoff" ? ` (${words(h.kind)})` : "";
    return el(
      "li",
      { class: earlier ? "earlier" : "" },
      el("span", { class: "mono" }, `${protocolName(h.from)} → ${protocolName(h.to)}`),
      kind,
      h.at ? el("span", { class: "when", text: ` ${clock(h.at)}` }) : null,
      earlier ? el("span", { class: "muted", text: " · earlier run" }) : null
    );
  }

  function renderProtocol() {
    const panel = $("protocol-panel");
    const governed = Boolean(protocolKey());
    panel.hidden = !governed;
    if (!governed) return;
    const p = protocolState();
    const status = $("protocol-status");
    const body = $("protocol-body");
    if (!p || !p.protocol) {
      status.textContent = "no run yet";
      status.className = "badge";
      body.replaceChildren(
        el("p", { class: "placeholder", text: "Each message is routed to a protocol (general-task, data-analysis, …); each phase allows only its own actions." })
      );
      return;
    }
    status.textContent = RUN_TEXT[p.run_status] || p.run_status || "";
    status.className = `badge run-${p.run_status}`;
    const rows = [
      el(
        "div",
        { class: "proto-head" },
        el("span", { id: "protocol-name", class: "proto-name", text: `${p.protocol}@${p.version}` }),
        el("span", { class: "dot", text: "·" }),
        el("span", { class: "muted", text: "phase" }),
        el("span", { id: "protocol-phase", class: "phase", text: words(p.phase) })
      ),
    ];
    const intent = p.intent || {};
    if (intent.text) {
      rows.push(
        factRow(
          "Intent",
          el("span", { id: "protocol-intent", class: "intent", text: truncate(intent.text, 160), title: intent.text }),
          intent.change_kind ? el("span", { class: "chip", text: words(intent.change_kind) }) : null
        )
      );
    }
    const route = p.route || {};
    const reasons = (route.reason_codes || []).join(", ");
    rows.push(
      factRow(
        "Route",
        el(
          "span",
          { id: "protocol-route", class: "mono small" },
          [route.source, reasons, route.task_relation].filter(Boolean).join(" · "),
          (route.warnings || []).length ? el("span", { class: "warn", text: ` ⚠ ${route.warnings.join(", ")}` }) : null
        )
      )
    );
    const current = (p.handoffs || []).map((h) => handoffItem({ from: h.from_protocol, to: h.to_protocol, kind: h.transition_kind, at: h.at }, false));
    const earlier = earlierHandoffs(p.run_id).slice(-3).map((h) => handoffItem(h, true));
    rows.push(
      factRow(
        "Handoffs",
        current.length || earlier.length
          ? el("ul", { id: "protocol-handoffs", class: "handoffs" }, ...current, ...earlier)
          : el("span", { id: "protocol-handoffs", class: "muted", text: "none" })
      )
    );
    if (p.run_status === "failed") {
      rows.push(
        el(
          "div",
          { id: "protocol-outcome", class: "proto-outcome failed", role: "status" },
          el("strong", { text: `Last run failed: ${p.run_outcome_code || "PROTOCOL_RUN_FAILED"}` }),
          p.run_outcome_message ? el("div", { class: "small", text: String(p.run_outcome_message).replace(/^[A-Z_]+:\s*/, "") }) : null
        )
      );
    } else if (p.run_status === "degraded" || p.run_status === "partial") {
      const code = p.run_outcome_code ? `: ${p.run_outcome_code}` : "";
      rows.push(el("div", { id: "protocol-outcome", class: `proto-outcome ${p.run_status}`, text: `Last run ${p.run_status}${code}` }));
    } // a completed run needs no line of its own: the badge says so

    body.replaceChildren(...rows);
  }

  function renderState() {
    renderProtocol();
    renderPlan();
    renderTodos();
    renderMode();
  }

  function describe(entry) {
    const d = entry.detail || {};
    const rev = entry.revision ? ` revision ${entry.revision}` : "";
    const hash = entry.sha256 && entry.revision ? ` (sha256 ${shortHash(entry.sha256)})` : "";
    switch (entry.kind) {
      case "plan.gate.denied":
        return { cls: "refusal", text: `Gate refused ${d.tool || "a tool"}: ${d.reason || "not allowed while planning"}` };
      case "plan.question":
        return { cls: "", text: `Asked question #${d.id}` };
      case "plan.answered":
        return { cls: "", text: `Answered question #${d.id}` };
      case "plan.revised":
        return { cls: "", text: `Revised the plan →${rev}` };
      case "plan.reply.ignored":
        return { cls: "refusal", text: `Ignored a reply: ${d.reason || ""}` };
      case "mode.selected":
        return { cls: "", text: entry.toState ? `Selected ${entry.toState} mode` : "Cleared the mode selection" };
      case "plan.transition": {
        const from = entry.fromState;
        const to = entry.toState;
        if (to === "pending_enter") return { cls: "", text: "Asked to enter Plan mode" };
        if (to === "exploring" && from === "pending_enter") return { cls: "decision", text: d.via ? "Entered Plan mode by selecting it" : "Confirmed Plan mode" };
        if (to === "exploring") return { cls: "", text: "Entered Plan mode (selected in the UI)" };
        if (to === "drafting" && from === "pending_approval") return { cls: "decision reject", text: `Rejected${rev}${d.note ? ` — “${d.note}”` : ""}` };
        if (to === "drafting") return { cls: "", text: `Started drafting →${rev}` };
        if (to === "pending_approval") return { cls: "", text: `Submitted${rev} for approval${hash}` };
        if (to === "approved") return { cls: "decision approve", text: `Approved${rev}${d.edited ? " with edits" : ""}${hash}` };
        if (to === "cancelled" && from === "pending_enter") return { cls: "decision reject", text: "Declined Plan mode" };
        if (to === "cancelled") return { cls: "", text: `Cancelled the plan${d.reason ? ` (${d.reason})` : ""}` };
        return { cls: "", text: `${from || "none"} → ${to}` };
      }
      case "protocol.route.resolved": {
        const why = [d.source, (d.reasonCodes || []).join(", "), d.taskRelation].filter(Boolean).join("; ");
        return { cls: "protocol", text: `Routed to ${d.protocol}${why ? ` (${why})` : ""}` };
      }
      case "protocol.route.failed":
        return { cls: "refusal", text: `Routing failed: ${d.reasonCode || ""}` };
      case "protocol.run.rejected":
        return { cls: "refusal", text: `Run not started: ${d.reasonCode || ""}` };
      case "protocol.segment.started":
        return { cls: "protocol", text: `Started ${d.protocol} in phase ${words(d.phase)}` };
      case "protocol.segment.ended":
        return { cls: "protocol", text: `Ended the segment (${words(d.status)})` };
      case "protocol.phase.entered":
        return { cls: "protocol", text: `Phase ${words(d.from)} → ${words(d.to)}` };
      case "protocol.handoff.proposed":
        return { cls: "protocol", text: `Proposed a handoff ${d.sourceProtocol} → ${d.targetProtocol}${d.reason ? `: ${d.reason}` : ""}` };
      case "protocol.handoff.accepted":
        return { cls: "decision approve", text: `Handoff accepted: now ${d.protocol}${d.transitionKind && d.transitionKind !== "handoff" ? ` (${words(d.transitionKind)})` : ""}` };
      case "protocol.handoff.rejected":
        return { cls: "refusal", text: `Handoff to ${d.targetProtocol || "?"} rejected: ${d.reasonCode || ""}` };
      case "protocol.handoff.failed":
        return { cls: "refusal", text: `Handoff to ${d.targetProtocol || "?"} failed: ${d.error || ""}` };
      case "protocol.action.rejected":
        return { cls: "refusal", text: `Protocol refused ${d.tool || d.action} in phase ${words(d.phase)} (${d.reasonCode})` };
      case "protocol.requirements.committed":
        return { cls: "protocol", text: `Committed ${Object.keys(d.requirements || {}).length} analysis requirement(s)` };
      case "protocol.run.failed":
        return { cls: "decision reject", text: `Run failed: ${(d.reasonCodes || []).join(", ") || d.message || ""}` };
      case "protocol.run.completed": {
        const reasons = (d.reasonCodes || []).length ? `: ${d.reasonCodes.join(", ")}` : "";
        return { cls: d.status === "completed" ? "decision approve" : "refusal", text: `Run ${d.status || "completed"}${reasons}` };
      }
      default:
        return { cls: "", text: entry.kind };
    }
  }

  // Bookkeeping the timeline leaves out (the API returns it): every recorded data call,
  // the routing request before its result, the run start beside its segment start.
  const QUIET_KINDS = new Set(["protocol.route.requested", "protocol.run.started", "protocol.action.recorded", "protocol.completion.proposed"]);

  function renderTimeline() {
    const list = $("timeline");
    const shown = S.journal.filter((entry) => !QUIET_KINDS.has(entry.kind));
    list.replaceChildren(
      ...shown.map((entry) => {
        const { cls, text } = describe(entry);
        return el(
          "li",
          { class: `event ${cls}`, title: `${entry.kind}${entry.sha256 ? " · sha256 " + entry.sha256 : ""}` },
          el("span", { class: "when mono", text: clock(entry.at) }),
          el("span", { class: `who actor-${["user", "model", "protocol"].includes(entry.actor) ? entry.actor : "agent"}`, text: entry.actor }),
          el("span", { class: "what", text })
        );
      })
    );
    if (!shown.length) list.append(el("li", { class: "placeholder", text: "Approvals, refusals, routing and mode changes appear here." }));
    $("timeline-count").textContent = shown.length ? String(shown.length) : "";
    list.scrollTop = list.scrollHeight;
  }

  async function refreshJournal() {
    const { ok, body } = await getJson(`/api/threads/${encodeURIComponent(S.threadId)}/journal`);
    if (ok) {
      S.journal = body.journal || [];
      renderTimeline();
      renderProtocol();
    }
  }

  // ---------------------------------------------------------------- interrupt cards

  function card(kind, title, ...children) {
    return el("div", { class: `card ${kind}`, role: "group", "aria-label": title }, el("h3", { text: title }), ...children);
  }

  function entryCard(interrupt) {
    const note = el("input", { type: "text", class: "note", placeholder: "Optional note for the agent", "aria-label": "Note" });
    const reply = (decision) => resume(interrupt, "resolved", { decision, ...(note.value.trim() ? { reviewer_note: note.value.trim() } : {}) });
    return card(
      "entry",
      "Enter Plan mode?",
      el("p", { text: interrupt.message }),
      el("p", { class: "muted", text: "While planning, only read-only tools run; the agent writes a plan for you to approve." }),
      note,
      el(
        "div",
        { class: "actions" },
        el("button", { type: "button", class: "primary", onclick: () => reply("approve"), text: "Confirm Plan mode" }),
        el("button", { type: "button", onclick: () => reply("reject"), text: "Decline" })
      )
    );
  }

  function questionCard(interrupt) {
    const meta = interrupt.metadata || {};
    const input = el("input", { type: "text", class: "answer", placeholder: "Or type your own answer…", "aria-label": "Your answer" });
    const send = () => input.value.trim() && resume(interrupt, "resolved", { answer: input.value.trim() });
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") {
        e.preventDefault();
        send();
      }
    });
    const options = (meta.options || []).map((option) =>
      el("button", { type: "button", class: "option", onclick: () => resume(interrupt, "resolved", { answer: option }), text: option })
    );
    return card(
      "question",
      `Question from the agent${meta.question_id ? ` (#${meta.question_id})` : ""}`,
      el("p", { class: "question-text", text: interrupt.message }),
      options.length ? el("div", { class: "options" }, options) : null,
      el("div", { class: "free" }, input, el("button", { type: "button", class: "primary", onclick: send, text: "Answer" }))
    );
  }

  function approvalCard(interrupt) {
    const meta = interrupt.metadata || {};
    const content = meta.content || "";
    const record = plan();
    const revisions = (record && record.revisions) || [];
    const previous = revisions.find((r) => r.number === meta.revision - 1);
    const editor = el("textarea", { class: "editor mono", rows: 10, spellcheck: "false", "aria-label": "Plan (editable before approving)" });
    editor.value = content;
    const editsBox = el("div", { class: "edits", hidden: true });
    const note = el("textarea", { class: "note", rows: 2, placeholder: "Note to the agent (needed to reject)", "aria-label": "Reviewer note" });
    const approve = el("button", { type: "button", class: "primary", text: "Approve" });
    const reject = el("button", { type: "button", class: "danger", text: "Reject" });
    const edited = () => editor.value !== content;
    editor.addEventListener("input", () => {
      approve.textContent = edited() ? "Approve with edits" : "Approve";
      editsBox.hidden = !edited();
      if (edited()) editsBox.replaceChildren(el("div", { class: "tool-label", text: `Your edits to revision ${meta.revision}` }), renderDiff(content, editor.value));
    });
    const payload = (decision) => {
      const p = { decision, revision: meta.revision, sha256: meta.sha256 };
      if (edited()) p.content = editor.value;
      if (note.value.trim()) p.reviewer_note = note.value.trim();
      return p;
    };
    approve.addEventListener("click", () => resume(interrupt, "resolved", payload("approve")));
    reject.addEventListener("click", () => {
      if (!note.value.trim()) {
        note.focus();
        note.classList.add("invalid");
        note.placeholder = "Say what should change, then press Reject";
        return;
      }
      resume(interrupt, "resolved", payload("reject"));
    });
    editor.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        approve.click();
      }
    });
    const diffSection = previous
      ? el("details", { class: "changes", open: true }, el("summary", { text: `Changes since revision ${previous.number}` }), renderDiff(previous.content, content))
      : el("p", { class: "muted", text: "First revision of this plan: nothing earlier to compare with." });
    return card(
      "approval",
      `Approve the plan? — revision ${meta.revision}`,
      el(
        "div",
        { class: "facts" },
        el("span", { text: interrupt.message }),
        el("span", { class: "dot", text: "·" }),
        el("span", { class: "mono", title: `sha256 ${meta.sha256}`, text: `sha256 ${shortHash(meta.sha256)}` })
      ),
      diffSection,
      el("label", { class: "tool-label", text: "Plan — edit before approving if you like (Ctrl+Enter approves)" }),
      editor,
      editsBox,
      note,
      el("div", { class: "actions" }, approve, reject)
    );
  }

  function renderCards() {
    const box = $("cards");
    box.replaceChildren(
      ...S.interrupts.map((interrupt) => {
        const node =
          interrupt.reason === "plan_approval" ? approvalCard(interrupt) : interrupt.reason === "question" ? questionCard(interrupt) : entryCard(interrupt);
        node.dataset.interruptId = interrupt.id;
        node.dataset.reason = interrupt.reason;
        return node;
      })
    );
    box.hidden = !S.interrupts.length;
    const first = box.querySelector("button.primary, button.option");
    if (first) first.focus({ preventScroll: true });
  }

  // ---------------------------------------------------------------- runs

  function setRunning(running) {
    S.running = running;
    $("send").disabled = running;
    $("run-indicator").hidden = !running;
    document.body.classList.toggle("running", running);
    for (const button of $("cards").querySelectorAll("button")) button.disabled = running;
  }

  function record(event) {
    const p = plan();
    const pr = protocolState();
    window.__events.push({
      type: event.type,
      at: performance.now(),
      runId: event.runId,
      code: event.code,
      outcome: event.outcome && event.outcome.type,
      reasons: event.outcome && event.outcome.interrupts ? event.outcome.interrupts.map((i) => i.reason) : undefined,
      planStatus: p ? p.status : null,
      planChars: p && p.content ? p.content.length : 0,
      planPanelChars: $("plan-body").textContent.length,
      toolName: event.toolCallName,
      protocol: pr ? pr.protocol : null,
      phase: pr ? pr.phase : null,
      runStatus: pr ? pr.run_status : null,
      handoffs: pr ? (pr.handoffs || []).length : 0,
    });
  }

  function handle(event) {
    switch (event.type) {
      case "RUN_STARTED":
        setRunning(true);
        break;
      case "STATE_SNAPSHOT":
        S.state = event.snapshot || {};
        S.selection = null;
        renderState();
        break;
      case "STATE_DELTA":
        try {
          S.state = applyPatch(S.state, event.delta);
        } catch (error) {
          console.warn("state patch failed; reloading the thread", error);
          loadThread();
        }
        renderState();
        break;
      case "TEXT_MESSAGE_START":
        assistantBubble(event.messageId);
        break;
      case "TEXT_MESSAGE_CONTENT": {
        const bubble = assistantBubble(event.messageId);
        setBubbleText(bubble, bubble.text + event.delta);
        break;
      }
      case "TEXT_MESSAGE_END":
        break;
      case "TOOL_CALL_START":
        toolBlock(event.toolCallId, event.toolCallName, event.parentMessageId);
        break;
      case "TOOL_CALL_ARGS": {
        const tool = S.tools.get(event.toolCallId);
        if (tool) setToolArgs(tool, tool.argText + event.delta);
        break;
      }
      case "TOOL_CALL_END":
        break;
      case "TOOL_CALL_RESULT":
        if (String(event.messageId).startsWith("reply:")) addDecision(event.toolCallId, event.content);
        setToolResult(event.toolCallId, event.content);
        break;
      case "RUN_FINISHED":
        S.interrupts = event.outcome && event.outcome.type === "interrupt" ? event.outcome.interrupts : [];
        setRunning(false);
        renderCards();
        break;
      case "RUN_ERROR": {
        setRunning(false);
        const code = event.code || "ERROR";
        const message = String(event.message || "");
        const text = message.startsWith(code) ? message : `${code}: ${message}`;
        const p = protocolState();
        const byProtocol = p && p.run_status === "failed" && p.run_outcome_code === event.code;
        showBanner(byProtocol ? `The protocol failed this run — ${text}` : text);
        if (event.code === "STALE_RESUME") loadThread();
        break;
      }
    }
    record(event);
  }

  async function run(input) {
    hideBanner();
    const body = {
      threadId: S.threadId,
      runId: randomId("run-"),
      state: { [S.keys.selection]: selection() },
      messages: input.messages || [],
      tools: [],
      context: [],
      forwardedProps: {},
    };
    if (input.resume) body.resume = input.resume;
    setRunning(true);
    let response;
    try {
      response = await fetch("/api/agent", {
        method: "POST",
        headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
        body: JSON.stringify(body),
      });
    } catch (error) {
      setRunning(false);
      showBanner(`Could not reach the server: ${error.message}`);
      return;
    }
    if (!response.ok) {
      const problem = await response.json().catch(() => ({}));
      setRunning(false);
      if (!authProblem(response.status)) showBanner(`${response.status} ${problem.code || ""}: ${problem.error || response.statusText}`);
      if (response.status === 409) pollWhileRunning();
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let finished = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
        const data = frame
          .split(/\r?\n/)
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).replace(/^ /, ""))
          .join("\n");
        const event = data && parseJson(data);
        if (!event) continue;
        handle(event);
        if (event.type === "RUN_FINISHED" || event.type === "RUN_ERROR") finished = true;
      }
    }
    if (!finished) {
      setRunning(false);
      showBanner("The connection ended before the run finished; reloading the thread.");
      await loadThread();
    }
    await refreshJournal();
    if (!S.interrupts.length) $("input").focus();
  }

  function resume(interrupt, status, payload) {
    if (S.running || S.loading) return;
    const node = $("cards").querySelector(`[data-interrupt-id="${CSS.escape(interrupt.id)}"]`);
    if (node) node.classList.add("sent");
    S.interrupts = S.interrupts.filter((i) => i.id !== interrupt.id);
    run({ resume: [{ interruptId: interrupt.id, status, payload }] }).then(() => {
      if (node && node.isConnected && node.classList.contains("sent")) renderCards();
    });
  }

  function send(event) {
    if (event) event.preventDefault();
    const input = $("input");
    const text = input.value.trim();
    if (!text || S.running || S.loading) return;
    input.value = "";
    addUserBubble(text);
    run({ messages: [{ id: randomId("msg-"), role: "user", content: text }] });
  }

  // ---------------------------------------------------------------- loading a thread

  function resetView() {
    S.tools.clear();
    S.bubbles.clear();
    S.state = {};
    S.interrupts = [];
    S.journal = [];
    const empty = $("empty");
    $("messages").replaceChildren(empty);
    empty.hidden = false;
  }

  let polling = false;

  async function pollWhileRunning() {
    if (polling) return;
    polling = true;
    showBanner("A run is in progress on this thread; the page refreshes when it ends.", "info");
    $("send").disabled = true;
    try {
      for (;;) {
        await new Promise((r) => setTimeout(r, 1000));
        const { ok, body } = await getJson(`/api/threads/${encodeURIComponent(S.threadId)}`);
        if (!ok || !body.running) break;
      }
    } finally {
      polling = false;
    }
    hideBanner();
    await loadThread();
  }

  async function loadThread() {
    S.loading = true;
    try {
      await fetchThread();
    } finally {
      S.loading = false;
      window.__events.push({ type: "THREAD_LOADED", at: performance.now(), messages: S.bubbles.size });
    }
  }

  async function fetchThread() {
    const { status, ok, body } = await getJson(`/api/threads/${encodeURIComponent(S.threadId)}`);
    resetView();
    if (authProblem(status)) return;
    if (status === 404) {
      // A new thread: it exists on the server from its first run on.
      renderState();
      renderTimeline();
      renderCards();
      setRunning(false);
      return;
    }
    if (!ok) {
      showBanner(`Could not load the thread: ${body.error || status}`);
      return;
    }
    if (body.stateKeys) S.keys = { ...S.keys, ...body.stateKeys };
    S.state = body.state || {};
    renderMessages(body.messages || []);
    S.interrupts = body.interrupts || [];
    S.journal = body.journal || [];
    renderState();
    renderTimeline();
    setRunning(false);
    renderCards();
    scrollDown(true);
    if (body.running) pollWhileRunning();
  }

  // ---------------------------------------------------------------- wiring

  async function choose(mode) {
    if (mode === "agent" && planActive()) {
      // The user's exit: cancel the plan now (journaled), withdrawing what waits for an answer.
      if (S.running || S.loading) return;
      const response = await fetch(`/api/threads/${encodeURIComponent(S.threadId)}/leave-plan`, {
        method: "POST",
        headers: headers({ "Content-Type": "application/json" }),
        body: "{}",
      });
      const body = await response.json().catch(() => ({}));
      if (!response.ok) {
        if (!authProblem(response.status)) showBanner(`${response.status} ${body.code || ""}: ${body.error || response.statusText}`);
        return;
      }
      S.selection = null;
      await loadThread();
      showBanner(body.message, "info");
      window.__events.push({ type: "LEFT_PLAN", at: performance.now() });
      return;
    }
    S.selection = mode === threadSelection() ? null : mode;
    renderMode();
  }

  async function start() {
    remember();
    trackScroll();
    renderState();
    renderTimeline();
    // Pasting a URL with a token or another thread into this tab only changes the hash.
    window.addEventListener("hashchange", () => {
      const next = new URLSearchParams(location.hash.slice(1));
      if (next.get("token") || (next.get("thread") && next.get("thread") !== S.threadId)) location.reload();
    });
    $("composer").addEventListener("submit", send);
    $("input").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) send(e);
    });
    for (const button of document.querySelectorAll(".toggle button")) {
      button.addEventListener("click", () => choose(button.dataset.mode));
    }
    $("new-thread").addEventListener("click", () => {
      if (S.running) return;
      S.threadId = randomId("t-");
      S.selection = null;
      remember();
      hideBanner();
      resetView();
      renderState();
      renderTimeline();
      renderCards();
      $("input").focus();
    });
    const info = await getJson("/api/info");
    if (authProblem(info.status)) return;
    if (info.ok) {
      $("model-info").textContent = info.body.model || "";
      $("model-info").title = info.body.workspace ? `workspace: ${info.body.workspace}` : "";
      const sandbox = info.body.sandbox;
      if (sandbox) {
        $("sandbox-info").textContent = sandbox.available ? "sandboxed" : "⚠ no sandbox";
        $("sandbox-info").classList.toggle("warn", !sandbox.available);
        $("sandbox-info").title = sandbox.detail + (sandbox.fix ? ` — to fix: ${sandbox.fix}` : "");
      }
      if (info.body.stateKeys) S.keys = { ...S.keys, ...info.body.stateKeys };
    }
    await loadThread();
    $("input").focus();
  }

  start();
})();
