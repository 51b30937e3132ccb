// plangate web UI: an AG-UI client with a live plan panel, approval cards and a governance
// timeline. No framework and no build step; every string from the server reaches the DOM
// as text nodes, or as Markdown rendered and sanitized by render.js.
"use strict";

(() => {
  // ---------------------------------------------------------------- small helpers

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = R.visible(value);
      else if (key === "html") node.innerHTML = value; // only ever sanitized output of render.js
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(R.visible(child)));
    }
    return node;
  }

  function randomId(prefix) {
    const bytes = new Uint8Array(8);
    crypto.getRandomValues(bytes);
    return prefix + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
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

  // ---------------------------------------------------------------- rendering (render.js)
  // Markdown, diffs and tool results for people; every HTML string it returns is sanitized.

  const R = window.plangateRender;
  const P = window.plangateScope; // the plan scope, its edit, and the cards of calls it pauses
  const renderDiff = (before, after) => R.renderDiff(before, after);

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
    fetching: false,
    loadAgain: false,
    loaded: Promise.resolve(), // the load in progress (or the last one)
    loadedRunning: false, // the thread had a run in progress when it was last loaded
    ownRun: false, // this page has a run in flight (its events come on its response)
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
    const response = await fetch(path, { headers: headers(), cache: "no-store" }).catch(() => null);
    if (!response) return { status: 0, ok: false, body: { error: "the server did not answer" } };
    const body = await response.json().catch(() => ({}));
    return { status: response.status, ok: response.ok, body };
  }

  // An optional action ({label, run}) offers the way on, e.g. Retry for a message kept.
  function showBanner(text, kind, action) {
    const banner = $("banner");
    const retry = action
      ? el("button", { type: "button", class: "small", onclick: () => { banner.hidden = true; action.run(); }, text: action.label })
      : null;
    banner.replaceChildren(
      el("span", { text }),
      el("span", { class: "banner-actions" }, retry, el("button", { type: "button", class: "ghost small", onclick: () => (banner.hidden = true), text: "Dismiss" }))
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
    const node = el("div", { class: "msg user" }, el("div", { class: "bubble", text }));
    $("messages").append(node);
    scrollDown(true);
    return node;
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
    entry.body.innerHTML = R.markdownHtml(text);
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

  // Refusals by a boundary before the call ran; everything else with an error failed.
  const GATE_CODES = new Set(["PLAN_MODE_GATE", "POLICY_DENIED"]);
  // Calls the user refused on a card (outside the scope, an edit under review, a tool call).
  const REFUSED_BY_YOU = new Set(["SCOPE_AMENDMENT_REFUSED", "EDIT_REFUSED", "TOOL_CALL_REFUSED"]);

  // A protocol refusal from its fields (phase, action, handoff targets), never its text.
  function protocolRefusal(name, result) {
    if (result.code !== "ACTION_NOT_ALLOWED_IN_PHASE") return truncate(result.message || result.error, 200);
    const targets = Array.isArray(result.handoff_targets) ? result.handoff_targets : [];
    let text = `${result.tool || name} is not allowed in phase “${result.phase}”`;
    if (targets.length) text += ` — it needs ${targets.join(" or ")} (a handoff)`;
    return text;
  }

  function resultSummary(name, result) {
    if (result === undefined) return { kind: "ok", text: "done" };
    if (result && typeof result === "object") {
      if (result.error) {
        // Results carry code, message and hint (plangate.errors); a foreign tool's error
        // may have only the text, shown as it is.
        const message = String(result.message || result.error);
        const hint = result.hint ? String(result.hint) : "";
        if (result.status === "ignored") return { kind: "ignored", text: message, hint };
        if (GATE_CODES.has(result.code)) return { kind: "refused", text: message, hint };
        if (REFUSED_BY_YOU.has(result.code)) return { kind: "rejected", text: message, hint };
        if (result.error_category === "protocol") return { kind: "refused", by: "protocol", text: protocolRefusal(name, result), hint };
        return { kind: "error", text: result.code ? `${message} (${result.code})` : message, hint };
      }
      if (result.status === "waiting") return { kind: "waiting", text: "still waiting for you" };
      // The card below says what the call waits for; the block only says that it waits.
      if (P.WAITING.has(result.status)) return { kind: "waiting", text: "waits for your decision on the card below" };
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
      if (name === "Edit" && "replacements" in result) return { kind: "ok", text: `edited ${result.path}` };
      if (name === "Write" && "bytes_written" in result) return { kind: "ok", text: `${result.created === false ? "rewrote" : "created"} ${result.path}` };
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
    const view = el("div", { class: "tool-view", hidden: true });
    // The summary names its call, so each tool block's tab stop says what it opens.
    const details = el(
      "details",
      { class: "tool-details" },
      el("summary", {}, "raw call", el("span", { class: "sr-only tool-which", text: ` #${S.tools.size + 1} of ${name}` })),
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
      view,
      details
    );
    bubble.tools.append(node);
    tool = { id, name, node, status, args, note, view, details, argsPre, resultPre, argText: "", number: S.tools.size + 1 };
    S.tools.set(id, tool);
    if (HITL.has(name)) setToolState(tool, "waiting", "");
    scrollDown();
    return tool;
  }

  function setToolArgs(tool, text) {
    tool.argText = text;
    const args = parseJson(text);
    tool.args.textContent = R.visible(argSummary(tool.name, args));
    tool.details.querySelector(".tool-which").textContent = ` #${tool.number} of ${tool.name} ${tool.args.textContent}`.trimEnd();
    tool.argsPre.textContent = R.visible(args === undefined ? text : JSON.stringify(args, null, 2));
  }

  function setToolState(tool, kind, text, by, hint) {
    tool.node.className = `tool ${kind}${by ? ` by-${by}` : ""}`;
    tool.status.textContent = STATUS_LABEL[by ? `${kind}-${by}` : kind] || kind;
    tool.note.replaceChildren(text || "", ...(hint ? [el("div", { class: "tool-hint", text: `What to do: ${hint}` })] : []));
    tool.note.hidden = !text;
  }

  function setToolResult(callId, content, name) {
    const tool = S.tools.get(callId) || toolBlock(callId, name || "tool", null);
    const result = parseJson(content);
    tool.resultPre.textContent = R.visible(result === undefined ? String(content) : JSON.stringify(result, null, 2));
    const summary = resultSummary(tool.name, result === undefined ? content : result);
    const quiet = summary.kind === "ok" && !SHOW_OK.has(tool.name);
    setToolState(tool, summary.kind, quiet ? "" : summary.text, summary.by, summary.hint);
    const view = R.toolView(tool.name, parseJson(tool.argText), result);
    tool.view.replaceChildren(...(view ? [view] : []));
    tool.view.hidden = !view;
    scrollDown();
  }

  function decisionText(result, toolName) {
    if (!result || typeof result !== "object") return "Replied";
    const scoped = P.decisionText(result);
    if (scoped) return scoped;
    if (result.status === "ignored") return `Reply ignored — ${result.message || result.error || ""}`;
    if (result.status === "cancelled") return "Left Plan mode — request withdrawn";
    if (result.status === "withdrawn") return `Withdrawn — ${result.message || "no longer needed"}`;
    if (toolName === "ask_user_question" || result.status === "answered") return `Answered: ${result.answer}`;
    if (toolName === "enter_plan_mode") return result.status === "approved" ? "Confirmed Plan mode" : "Declined Plan mode";
    const revision = result.plan && result.plan.contentRevisions;
    if (result.status === "approved") {
      const edited = result.edited ? " with edits" : "";
      return `Approved the plan (revision ${revision})${edited}`;
    }
    if (result.status === "rejected") return `Rejected revision ${revision}${result.reviewer_note ? `: ${result.reviewer_note}` : ""}`;
    return result.status || "Replied";
  }

  function addDecision(callId, content) {
    const result = parseJson(content);
    const tool = S.tools.get(callId);
    if (collapseCard(callId, decisionText(result, tool && tool.name))) return;
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
    if (record.scopeSummary) {
      const permission = record.status === "approved" && record.permission === "ask_each_edit" ? el("span", { class: "chip", text: "you review each edit" }) : null;
      rows.push(el("div", { class: "plan-scope" }, el("span", { class: "label", text: "Scope" }), el("span", { class: "scope-summary", html: R.inlineHtml(record.scopeSummary) }), permission));
    } else if (record.status === "approved" && record.permission === "ask_each_edit") {
      rows.push(el("div", { class: "plan-scope" }, el("span", { class: "label", text: "Scope" }), "the whole workspace", el("span", { class: "chip", text: "you review each edit" })));
    }
    if (record.reviewerNote) rows.push(el("div", { class: "reviewer-note" }, el("span", { class: "label", text: "Reviewer note" }), record.reviewerNote));
    if (record.status === "approved" && !record.closedAt) {
      // The grant holds until the user closes the plan, even once every todo is done.
      const note = record.finishedAt ? "The agent marked every todo done. " : "";
      rows.push(
        el(
          "div",
          { class: "plan-close" },
          el("span", { class: "hint", text: `${note}The scope and permission hold until you close the plan.` }),
          el("button", { id: "close-plan", type: "button", class: "small", text: "Close plan", onclick: closePlan })
        )
      );
    } else if (record.status === "approved" && record.closedAt) {
      rows.push(el("div", { class: "plan-close" }, el("span", { class: "hint", text: "Closed by you: its scope and permission no longer apply." })));
    }
    meta.replaceChildren(...rows);
    if (record.content) {
      body.innerHTML = R.markdownHtml(record.content);
    } else {
      body.replaceChildren(el("p", { class: "placeholder", text: "The plan is still empty: the agent is exploring." }));
    }
  }

  function renderTodos() {
    const todos = S.state[todosKey()] || [];
    const list = $("todos");
    list.replaceChildren(
      ...todos.map((t) =>
        el("li", { class: `todo ${t.status}` }, el("span", { class: "todo-mark", "aria-hidden": "true" }), el("span", { class: "todo-text", html: R.inlineHtml(t.content) }), el("span", { class: "sr-only", text: ` (${t.status})` }))
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
    const scoped = P.describe(entry);
    if (scoped) return scoped;
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
      case "mode.requested":
        return { cls: "", text: `Asked for ${entry.toState} mode from the next step` };
      case "run.stopped":
        return { cls: "refusal", text: "Stopped the run" };
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
        if (to === "approved") {
          const each = d.permission === "ask_each_edit" ? ", reviewing each edit" : "";
          return { cls: "decision approve", text: `Approved${rev}${d.edited ? " with edits" : ""}${each}${hash}` };
        }
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
  // Every open request of a step gets its own card in the conversation, in the order the
  // model asked. Each card is answered on its own (the server records it at once) and the
  // agent resumes when the last one is answered. A decided card collapses in place to a
  // one-line chip.

  const cardNodes = new Map(); // interrupt id -> card node in #messages
  let keptCards = new Map(); // cards of the view a reload replaced, reused while still open

  function card(kind, title, ...children) {
    return el("div", { class: `card ${kind}`, role: "group", "aria-label": title }, el("h3", { text: title }), ...children);
  }

  function cardTitle(interrupt) {
    if (interrupt.reason === "plan_approval") return `Approve the plan? — revision ${(interrupt.metadata || {}).revision}`;
    if (interrupt.reason === "question") return "Question from the agent";
    if (P.REASONS.has(interrupt.reason)) return P.title(interrupt);
    return "Enter Plan mode?";
  }

  function entryCard(interrupt) {
    const note = el("input", { type: "text", class: "note", placeholder: "Optional note for the agent", "aria-label": "Note" });
    const reply = (decision) => resume(interrupt, "resolved", { decision, ...(note.value.trim() ? { reviewer_note: note.value.trim() } : {}) });
    return card(
      "entry",
      cardTitle(interrupt),
      el("p", { text: interrupt.message }),
      el("p", { class: "muted", text: "While planning, only read-only tools run; the agent writes a plan for you to approve." }),
      note,
      el(
        "div",
        { class: "actions" },
        el("button", { type: "button", class: "primary", onclick: () => reply("approve"), text: "Confirm Plan mode" }),
        el("button", { type: "button", class: "decline", onclick: () => reply("reject"), text: "Decline" })
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
      `${cardTitle(interrupt)}${meta.question_id ? ` (#${meta.question_id})` : ""}`,
      el("p", { class: "question-text", text: interrupt.message }),
      options.length ? el("div", { class: "options" }, options) : null,
      el("div", { class: "free" }, input, el("button", { type: "button", class: "primary", onclick: send, text: "Answer" }))
    );
  }

  // Edit the plan as text, or preview it rendered; the action bar stays in view while the
  // plan scrolls (a long plan must never push Approve and Reject out of sight).
  function planViewToggle(editor, preview) {
    const editButton = el("button", { type: "button", class: "ghost small", "aria-pressed": "true", text: "Edit" });
    const previewButton = el("button", { type: "button", class: "ghost small", "aria-pressed": "false", text: "Preview" });
    const show = (previewing) => {
      if (previewing) preview.innerHTML = R.markdownHtml(editor.value);
      editor.hidden = previewing;
      preview.hidden = !previewing;
      editButton.setAttribute("aria-pressed", String(!previewing));
      previewButton.setAttribute("aria-pressed", String(previewing));
    };
    editButton.addEventListener("click", () => show(false));
    previewButton.addEventListener("click", () => show(true));
    return el("div", { class: "view-toggle", role: "group", "aria-label": "Plan view" }, editButton, previewButton);
  }

  function approvalCard(interrupt) {
    const meta = interrupt.metadata || {};
    const content = meta.content || "";
    const record = plan();
    const revisions = (record && record.revisions) || [];
    const previous = revisions.find((r) => r.number === meta.revision - 1);
    const editor = el("textarea", { class: "editor mono", rows: 10, spellcheck: "false", "aria-label": "Plan (editable before approving)" });
    editor.value = content;
    const preview = el("div", { class: "plan-preview markdown", hidden: true, tabindex: "0", "aria-label": "Plan preview" });
    const editsBox = el("div", { class: "edits", hidden: true });
    const note = el("textarea", { class: "note", rows: 2, placeholder: "Note to the agent (needed to reject)", "aria-label": "Reviewer note" });
    const approve = el("button", { type: "button", class: "primary", text: "Approve" });
    const reject = el("button", { type: "button", class: "danger", text: "Reject" });
    // The scope is approved with the text: shown as a line and a list, edited like the plan.
    const scopeEdit = P.scopeEditor(meta.scope, { label: meta.scope ? "Edit the scope" : "Give the plan a scope", onchange: () => relabel() });
    const permission = P.permissionChoice(meta.permission_options);
    const edited = () => editor.value !== content || scopeEdit.changed();
    const relabel = () => (approve.textContent = edited() ? "Approve with edits" : "Approve");
    editor.addEventListener("input", () => {
      relabel();
      editsBox.hidden = editor.value === content;
      if (!editsBox.hidden) editsBox.replaceChildren(el("div", { class: "tool-label", text: `Your edits to revision ${meta.revision}` }), renderDiff(content, editor.value));
    });
    note.addEventListener("input", () => note.classList.remove("invalid"));
    const payload = (decision) => {
      const p = { decision, revision: meta.revision, sha256: meta.sha256 };
      if (editor.value !== content) p.content = editor.value;
      if (decision === "approve" && scopeEdit.changed()) p.scope = scopeEdit.value();
      if (decision === "approve") p.permission = permission.value();
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
      cardTitle(interrupt),
      el(
        "div",
        { class: "facts" },
        el("span", { text: interrupt.message }),
        el("span", { class: "dot", text: "·" }),
        el("span", { class: "mono", title: `sha256 ${meta.sha256}`, text: `sha256 ${shortHash(meta.sha256)}` })
      ),
      el("div", { class: "tool-label", text: "What approving grants" }),
      P.scopeFacts(meta.scope, meta.scope_summary, "Plan scope"),
      scopeEdit.node,
      diffSection,
      el("div", { class: "plan-head" }, el("label", { class: "tool-label", text: "Plan — edit before approving if you like (Ctrl+Enter approves)" }), planViewToggle(editor, preview)),
      editor,
      preview,
      editsBox,
      permission.node,
      note,
      el("div", { class: "actions sticky" }, approve, reject)
    );
  }

  function cardFor(interrupt) {
    if (interrupt.reason === "plan_approval") return approvalCard(interrupt);
    if (interrupt.reason === "question") return questionCard(interrupt);
    if (P.REASONS.has(interrupt.reason)) return P.requestCard(interrupt, { card, reply: (decision, extra) => resume(interrupt, "resolved", { decision, ...extra }), scope: () => (plan() || {}).scope || (interrupt.metadata || {}).scope });
    return entryCard(interrupt);
  }

  function cardByCall(callId) {
    for (const [id, node] of cardNodes) if (node.dataset.callId === callId) return [id, node];
    return [null, null];
  }

  // A decided request: its card (if shown) collapses in place into a one-line chip.
  function collapseCard(callId, text) {
    const [id, node] = cardByCall(callId);
    if (!node) return false;
    cardNodes.delete(id);
    const chip = el("div", { class: "msg user decision chip", "data-call-id": callId }, el("div", { class: "bubble", text }));
    node.replaceWith(chip);
    return true;
  }

  function renderCards() {
    const open = new Set(S.interrupts.map((i) => i.id));
    for (const [id, node] of [...cardNodes]) {
      if (open.has(id)) continue;
      // Answered or withdrawn without this page seeing the answer (another tab, a reload).
      cardNodes.delete(id);
      node.replaceWith(el("div", { class: "msg user decision chip stale" }, el("div", { class: "bubble", text: "No longer waiting: answered or withdrawn elsewhere" })));
    }
    const added = [];
    const reused = keptCards;
    keptCards = new Map();
    for (const interrupt of S.interrupts) {
      if (cardNodes.has(interrupt.id)) continue;
      const old = reused.get(interrupt.id);
      if (old) {
        old.classList.remove("sent");
        $("empty").hidden = true;
        $("messages").append(old);
        cardNodes.set(interrupt.id, old);
        continue;
      }
      const node = cardFor(interrupt);
      node.dataset.interruptId = interrupt.id;
      node.dataset.callId = interrupt.toolCallId || "";
      node.dataset.reason = interrupt.reason;
      $("empty").hidden = true;
      $("messages").append(node);
      cardNodes.set(interrupt.id, node);
      added.push(interrupt);
    }
    renderWaiting();
    if (!added.length) return;
    const first = cardNodes.get(added[0].id);
    // Bring each new card into view, its top first (a plan can be longer than the screen).
    first.scrollIntoView({ block: "start" });
    following = false;
    const button = first.querySelector("button.primary, button.option");
    if (button && !S.running) button.focus({ preventScroll: true });
    announce(
      added.length === 1
        ? `Waiting for you: ${cardTitle(added[0])}. ${truncate(added[0].message, 160)}`
        : `${added.length} requests wait for you: ${added.map(cardTitle).join("; ")}.`
    );
  }

  function announce(text) {
    const region = $("announcer");
    region.textContent = "";
    // A changed text node is what screen readers announce; clear first so a repeat is read.
    setTimeout(() => (region.textContent = text), 50);
  }

  // "Waiting for you": the page says so in the header, the tab title and the composer,
  // which then answers the first open card instead of starting a second turn.
  function renderWaiting() {
    const waiting = !S.running && !S.loading && S.interrupts.length > 0;
    document.body.classList.toggle("waiting", waiting);
    const indicator = $("run-indicator");
    indicator.hidden = !S.running && !waiting;
    indicator.textContent = S.running ? "working…" : waiting ? "waiting for you" : "";
    indicator.classList.toggle("waiting", waiting);
    document.title = waiting ? "● waiting for you — plangate" : "plangate";
    const hint = $("reply-hint");
    const target = S.interrupts[0];
    const input = $("input");
    if (!waiting || !target) {
      hint.hidden = true;
      input.placeholder = "Describe a task… (Enter to send, Shift+Enter for a new line)";
      return;
    }
    const where = S.interrupts.length > 1 ? ` (1 of ${S.interrupts.length})` : "";
    const what = target.reason === "question" ? "answers" : "becomes the note on";
    hint.replaceChildren(
      el("span", { text: `Your message ${what}: ${cardTitle(target)}${where}.` }),
      el("button", { type: "button", class: "ghost small", onclick: () => cancelRequest(target), text: "Cancel this request" })
    );
    hint.hidden = false;
    input.placeholder = target.reason === "question" ? "Type your answer…" : "Type a note for the agent, then choose on the card…";
  }

  function cancelRequest(interrupt) {
    resume(interrupt, "cancelled", {});
  }

  // Text typed while a card waits belongs to that card: a question's answer, or the note
  // on a decision (which stays a click on the card). It never starts a second turn.
  function replyWithText(interrupt, text) {
    const node = cardNodes.get(interrupt.id);
    if (interrupt.reason === "question") {
      resume(interrupt, "resolved", { answer: text }, { restore: text });
      $("input").value = "";
      saveDraft();
      return;
    }
    const note = node && node.querySelector(".note");
    if (!note) return;
    note.value = note.value.trim() ? `${note.value.trim()}\n${text}` : text;
    note.dispatchEvent(new Event("input"));
    $("input").value = "";
    saveDraft();
    const decline = node.querySelector("button.danger, button.decline");
    node.scrollIntoView({ block: "nearest" });
    if (decline) decline.focus({ preventScroll: true });
    announce("Your text is now the note on the card. Choose on the card to send it.");
  }

  // ---------------------------------------------------------------- errors in plain words

  const PLAIN = {
    STALE_RESUME: "That request is no longer waiting: it was already answered, withdrawn or replaced (perhaps in another tab). Nothing was changed; the page now shows what waits for you.",
    ALREADY_ANSWERED: "That request was already answered or withdrawn; the first answer stands.",
    UNKNOWN_REQUEST: "That request is not waiting here any more; the page now shows what waits for you.",
    STALE_REPLY: "The plan changed since you reviewed it; look at what is shown now and decide again.",
    RUN_IN_PROGRESS: "The agent is still working on this thread (perhaps started in another tab).",
    RUN_STOPPED: "Stopped. Nothing after this point ran; send a message to go on.",
  };
  const REPLY_CODES = new Set(["STALE_RESUME", "ALREADY_ANSWERED", "UNKNOWN_REQUEST", "STALE_REPLY", "NO_MATCHING_REQUEST", "AMBIGUOUS_REPLY", "INVALID_REPLY"]);

  // One message, its code once: "message (CODE)". Raw request ids mean nothing to a reader.
  function errorText(code, message) {
    if (PLAIN[code]) return PLAIN[code];
    let text = String(message || "").trim();
    while (code && text.startsWith(`${code}:`)) text = text.slice(code.length + 1).trim();
    text = text.replace(/'?\b[0-9a-f]{32}\b'?/g, "that request");
    if (!code) return text;
    return text ? `${text} (${code})` : code;
  }

  // ---------------------------------------------------------------- runs

  function setRunning(running) {
    S.running = running;
    $("send").disabled = running;
    $("stop").hidden = !running;
    $("stop").disabled = false;
    document.body.classList.toggle("running", running);
    for (const node of cardNodes.values()) for (const button of node.querySelectorAll("button")) button.disabled = running;
    renderWaiting();
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
        S.streamed = true; // the view now holds more than the last load
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
        const text = errorText(code, event.message);
        const p = protocolState();
        const byProtocol = p && p.run_status === "failed" && p.run_outcome_code === event.code;
        if (code === "RUN_STOPPED") showBanner(text, "info");
        else showBanner(byProtocol ? `The protocol failed this run — ${text}` : text);
        if (REPLY_CODES.has(code)) loadThread();
        break;
      }
    }
    record(event);
  }

  // One AG-UI run. Resolves to {accepted, finished}: accepted once the server took the
  // input (the caller may then forget it), finished when a terminal event arrived.
  async function run(input, onAccepted) {
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
    ownRuns.add(body.runId); // its events come on the response; the live stream skips them
    S.ownRun = true;
    try {
      return await runOwn(body, onAccepted);
    } finally {
      S.ownRun = false;
    }
  }

  // The JSON events of a server-sent event stream, in order (the `data:` lines of each
  // frame joined; frames without JSON are skipped). Used by a run's own response and by
  // the live stream of a thread.
  async function* streamEvents(response) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
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
        if (event) yield event;
      }
    }
  }

  async function runOwn(body, onAccepted) {
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
      return { accepted: false, problem: `Could not reach the server (${error.message}).` };
    }
    if (!response.ok) {
      const problem = await response.json().catch(() => ({}));
      setRunning(false);
      if (authProblem(response.status)) return { accepted: false, problem: null };
      if (response.status === 409) pollWhileRunning();
      return { accepted: false, problem: errorText(problem.code, problem.error || `${response.status} ${response.statusText}`) };
    }
    if (onAccepted) onAccepted();
    broadcast("started");
    let finished = false;
    try {
      for await (const event of streamEvents(response)) {
        handle(event);
        if (event.type === "RUN_FINISHED" || event.type === "RUN_ERROR") finished = true;
      }
    } catch (error) {
      console.warn("the event stream broke", error);
    }
    if (!finished) {
      setRunning(false);
      showBanner("The connection ended before the run finished; reloading the thread.");
      await loadThread();
    }
    await refreshJournal();
    broadcast("changed");
    if (!S.interrupts.length) $("input").focus();
    return { accepted: true, finished };
  }

  // Answer one card. The card dims while its answer travels; on failure it comes back
  // (and typed text returns to the composer) with a Retry.
  async function resume(interrupt, status, payload, options) {
    await settled();
    if (S.running || S.loading) return;
    if (!S.interrupts.some((i) => i.id === interrupt.id)) {
      showBanner(PLAIN.STALE_RESUME, "info");
      return;
    }
    const node = cardNodes.get(interrupt.id);
    if (node) node.classList.add("sent");
    const result = await run({ resume: [{ interruptId: interrupt.id, status, payload }] });
    if (result.accepted) return;
    if (node) node.classList.remove("sent");
    if (options && options.restore && !$("input").value) $("input").value = options.restore;
    if (result.problem) showBanner(`${result.problem} Your answer was not sent.`, "error", { label: "Retry", run: () => resume(interrupt, status, payload, options) });
  }

  // A click or a keypress during a background reload (another tab's news) waits for it
  // rather than being dropped.
  async function settled() {
    while (S.fetching) await new Promise((resolve) => setTimeout(resolve, 50));
  }

  async function send(event) {
    if (event) event.preventDefault();
    await settled();
    const input = $("input");
    const text = input.value.trim();
    if (!text || S.running || S.loading) return;
    if (S.interrupts.length) {
      replyWithText(S.interrupts[0], text);
      return;
    }
    submitMessage(text);
  }

  // A new turn. The text stays in the composer (and in this tab's storage) until the
  // server has taken it; a refusal or an unreachable server offers a Retry.
  async function submitMessage(text) {
    const bubble = addUserBubble(text);
    bubble.classList.add("sending");
    const result = await run({ messages: [{ id: randomId("msg-"), role: "user", content: text }] }, () => {
      bubble.classList.remove("sending");
      const input = $("input");
      if (input.value.trim() === text) input.value = "";
      saveDraft();
    });
    if (result.accepted) return;
    bubble.remove();
    if (!$("input").value.trim()) $("input").value = text;
    saveDraft();
    if (result.problem) showBanner(`${result.problem} Your message is kept below.`, "error", { label: "Retry", run: () => send() });
  }

  async function stopRun() {
    $("stop").disabled = true;
    const response = await fetch(`/api/threads/${encodeURIComponent(S.threadId)}/stop`, {
      method: "POST",
      headers: headers({ "Content-Type": "application/json" }),
      body: "{}",
    }).catch(() => null);
    if (!response || !response.ok) {
      $("stop").disabled = false;
      showBanner("Could not stop the run: the server did not answer. Try again.");
    }
  }

  // ---------------------------------------------------------------- drafts and other tabs

  function draftKey() {
    return `plangate.draft.${S.threadId}`;
  }

  function saveDraft() {
    const text = $("input").value;
    if (text.trim()) localStorage.setItem(draftKey(), text);
    else localStorage.removeItem(draftKey());
  }

  function restoreDraft() {
    const draft = localStorage.getItem(draftKey());
    if (draft && !$("input").value.trim()) $("input").value = draft;
  }

  // Tabs on the same thread tell each other when it changed; the others reload it (and
  // follow a run in progress until it ends).
  const channel = "BroadcastChannel" in window ? new BroadcastChannel("plangate") : null;

  function broadcast(kind) {
    if (channel) channel.postMessage({ threadId: S.threadId, kind });
  }

  function listenToOtherTabs() {
    if (!channel) return;
    let pending = null;
    channel.onmessage = ({ data }) => {
      if (!data || data.threadId !== S.threadId || S.running) return;
      clearTimeout(pending);
      pending = setTimeout(() => {
        if (!S.running) loadThread();
      }, 100);
    };
  }

  // ---------------------------------------------------------------- loading a thread

  function resetView() {
    S.tools.clear();
    S.bubbles.clear();
    cardNodes.clear();
    S.state = {};
    S.interrupts = [];
    S.journal = [];
    const empty = $("empty");
    $("messages").replaceChildren(empty);
    empty.hidden = false;
  }

  // ---------------------------------------------------------------- following a thread live

  // The thread's live events come from whichever server runs it (several servers on one
  // PostgreSQL database pass them on to each other). A run this page started arrives on
  // its own response; any other run is shown as it goes, and the thread is reloaded when
  // it ends or when something changed between runs.
  const ownRuns = new Set();
  const live = { controller: null, threadId: null, connected: false, foreign: false, chain: Promise.resolve() };

  function follow() {
    if (live.controller && live.threadId === S.threadId) return;
    if (live.controller) live.controller.abort();
    const controller = new AbortController();
    Object.assign(live, { controller, threadId: S.threadId, connected: false, foreign: false });
    readLive(S.threadId, controller).finally(() => {
      if (live.controller !== controller) return; // another thread is followed now
      live.controller = null;
      live.connected = false;
      if (!controller.signal.aborted) setTimeout(() => live.controller || follow(), 2000);
    });
  }

  async function readLive(threadId, controller) {
    let response;
    try {
      response = await fetch(`/api/threads/${encodeURIComponent(threadId)}/live`, {
        headers: headers({ Accept: "text/event-stream" }),
        cache: "no-store",
        signal: controller.signal,
      });
    } catch {
      return;
    }
    if (!response.ok) {
      if (response.status === 401) controller.abort(); // the token banner says why
      return;
    }
    try {
      for await (const event of streamEvents(response)) {
        // One at a time, in order: a reload started by one event finishes first.
        live.chain = live.chain.then(() => onLive(event)).catch((e) => console.warn(e));
      }
    } catch {
      // aborted (another thread) or the server went away: follow() tries again
    }
  }

  async function onLive(event) {
    if (event.type === "CUSTOM" && event.name === "plangate.live.ready") {
      live.connected = true;
      window.__events.push({ type: "LIVE_READY", at: performance.now(), threadId: live.threadId });
      return;
    }
    if (event.type === "CUSTOM" && (event.name === "plangate.thread.changed" || event.name === "plangate.live.gap")) {
      if (!S.running || live.foreign) await loadThread();
      return;
    }
    if (event.type === "RUN_STARTED") {
      live.foreign = !ownRuns.has(event.runId);
      if (!live.foreign) return;
      showBanner("A run is in progress on this thread (from another page or server); it is shown as it goes.", "info");
      await loadThread(); // the message that started it, and what was stored so far
    }
    if (!live.foreign) return;
    handle(event);
    window.__events.push({ type: `LIVE_${event.type}`, at: performance.now(), runId: event.runId });
    if (event.type === "RUN_FINISHED" || event.type === "RUN_ERROR") {
      live.foreign = false;
      if (event.type === "RUN_FINISHED") hideBanner();
      S.streamed = true; // reload even if the stored thread looks as it did
      await loadThread();
      await refreshJournal();
    }
  }

  let polling = false;

  async function pollWhileRunning() {
    if (live.connected) {
      // Someone else's run: the live stream shows it and reloads the thread when it ends.
      showBanner("A run is in progress on this thread; the page follows it live.", "info");
      if (!S.ownRun) {
        live.foreign = true;
        setRunning(true);
      }
      return;
    }
    if (polling) return;
    polling = true;
    showBanner("A run is in progress on this thread; the page follows it and refreshes when it ends.", "info");
    $("send").disabled = true;
    try {
      for (;;) {
        await new Promise((r) => setTimeout(r, 1000));
        // Another load (a message from the tab that ran) already showed the run's end.
        if (!S.loadedRunning) return;
        const { ok, body } = await getJson(`/api/threads/${encodeURIComponent(S.threadId)}`);
        if (!ok || !body.running) break;
      }
    } finally {
      polling = false;
    }
    hideBanner();
    await loadThread();
  }

  function loadThread() {
    // One load at a time: a load asked for meanwhile runs once the current one is done,
    // and its caller waits for that (a live change note can start a load just before an
    // action of the user's reloads too: both see the thread as it is afterwards).
    if (S.fetching) {
      S.loadAgain = true;
      return S.loaded;
    }
    S.loading = S.fetching = true;
    S.loaded = (async () => {
      try {
        do {
          S.loadAgain = false;
          await fetchThread();
        } while (S.loadAgain);
      } finally {
        S.loading = S.fetching = false;
        renderWaiting();
        window.__events.push({ type: "THREAD_LOADED", at: performance.now(), messages: S.bubbles.size });
      }
    })();
    return S.loaded;
  }

  async function fetchThread() {
    follow();
    const { status, ok, body } = await getJson(`/api/threads/${encodeURIComponent(S.threadId)}`);
    // Nothing changed since the last load (a sync message about what this page shows
    // already): leave the page alone, with whatever the user is typing into a card.
    const signature = `${S.threadId} ${status} ${JSON.stringify(body)}`;
    if (ok && signature === S.signature && !S.streamed) return;
    S.signature = signature;
    S.streamed = false;
    // Cards still open keep their node, and so what was typed into them.
    const kept = new Map(cardNodes);
    resetView();
    keptCards = kept;
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
      showBanner(`Could not load the thread: ${errorText(body.code, body.error || String(status))}`);
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
    S.loadedRunning = Boolean(body.running);
    if (body.running) {
      $("stop").hidden = false;
      pollWhileRunning();
    } else if (polling) {
      hideBanner();
    }
  }

  // ---------------------------------------------------------------- thread list

  function ago(seconds) {
    const s = Math.max(0, Date.now() / 1000 - seconds);
    if (s < 60) return "just now";
    if (s < 3600) return `${Math.floor(s / 60)} min ago`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
    return new Date(seconds * 1000).toLocaleDateString();
  }

  async function toggleThreads() {
    const box = $("thread-list");
    const button = $("threads-button");
    if (!box.hidden) {
      box.hidden = true;
      button.setAttribute("aria-expanded", "false");
      return;
    }
    box.replaceChildren(el("p", { class: "muted", text: "Loading threads…" }));
    box.hidden = false;
    button.setAttribute("aria-expanded", "true");
    const { ok, body } = await getJson("/api/threads");
    if (!ok) {
      box.replaceChildren(el("p", { class: "muted", text: `Could not list the threads: ${errorText(body.code, body.error)}` }));
      return;
    }
    const threads = body.threads || [];
    const items = threads.map((t) => {
      const title = t.title || "(no message yet)";
      return el(
        "li",
        { class: "thread-row" },
        el(
          "button",
          { type: "button", class: "thread-item", "data-thread-id": t.threadId, "aria-current": t.threadId === S.threadId ? "true" : null, onclick: () => openThread(t.threadId) },
          el("span", { class: "thread-title", text: title }),
          el("span", { class: "thread-meta", text: [ago(t.updatedAt), t.branchOf ? "branch" : "", t.planStatus ? `plan ${words(t.planStatus)}` : "", t.running ? "running" : ""].filter(Boolean).join(" · ") })
        ),
        el(
          "span",
          { class: "thread-actions" },
          el("button", { type: "button", class: "ghost small", "data-action": "branch", "aria-label": `Branch from here: ${title}`, title: "A new thread that starts where this one is now", disabled: t.running, onclick: () => branchThread(t.threadId) }, "Branch from here"),
          el("button", { type: "button", class: "ghost small danger", "data-action": "delete", "aria-label": `Delete thread: ${title}`, disabled: t.running, onclick: () => deleteThread(t.threadId, title) }, "Delete")
        )
      );
    });
    box.replaceChildren(
      el("h2", { class: "sr-only", text: "Threads" }),
      items.length ? el("ul", { class: "threads" }, items) : el("p", { class: "muted", text: "No threads yet: send a message to start one." })
    );
    const current = box.querySelector('[aria-current="true"]') || box.querySelector("button");
    if (current) current.focus();
  }

  // A branch starts where the thread is now and goes its own way; the original stays.
  async function branchThread(threadId) {
    if (S.running) {
      showBanner("Wait for the run to end (or stop it) before branching a thread.", "info");
      return;
    }
    const { ok, status, body } = await postJson(`/api/threads/${encodeURIComponent(threadId)}/branch`, {});
    if (!ok) {
      if (!authProblem(status)) showBanner(`Could not branch the thread: ${errorText(body.code, body.error)}`);
      return;
    }
    await openThread(body.threadId);
    showBanner("Branched: this is a new thread that starts where the other one was. The original is unchanged.", "info");
    window.__events.push({ type: "THREAD_BRANCHED", from: threadId, threadId: body.threadId, at: performance.now() });
  }

  async function deleteThread(threadId, title) {
    if (!window.confirm(`Delete the thread "${title}"? Its messages and plan are removed; the journal keeps a record of the deletion.`)) return;
    const response = await fetch(`/api/threads/${encodeURIComponent(threadId)}`, { method: "DELETE", headers: headers({}) }).catch(() => null);
    const body = response ? await response.json().catch(() => ({})) : { error: "the server did not answer" };
    if (!response || !response.ok) {
      if (!response || !authProblem(response.status)) showBanner(`Could not delete the thread: ${errorText(body.code, body.error)}`);
      return;
    }
    localStorage.removeItem(`plangate.draft.${threadId}`);
    if (threadId === S.threadId) startNewThread();
    // The list again, without the deleted thread.
    $("thread-list").hidden = true;
    await toggleThreads();
    showBanner("The thread was deleted.", "info");
    window.__events.push({ type: "THREAD_DELETED", threadId, at: performance.now() });
  }

  async function openThread(threadId) {
    if (S.running) {
      showBanner("Wait for the run to end (or stop it) before opening another thread.", "info");
      return;
    }
    $("thread-list").hidden = true;
    $("threads-button").setAttribute("aria-expanded", "false");
    saveDraft();
    S.threadId = threadId;
    S.selection = null;
    remember();
    hideBanner();
    $("input").value = "";
    await loadThread();
    restoreDraft();
  }

  // ---------------------------------------------------------------- wiring

  async function postJson(path, payload) {
    const response = await fetch(path, {
      method: "POST",
      headers: headers({ "Content-Type": "application/json" }),
      body: JSON.stringify(payload),
    }).catch(() => null);
    if (!response) return { ok: false, status: 0, body: { error: "the server did not answer" } };
    const body = await response.json().catch(() => ({}));
    return { ok: response.ok, status: response.status, body };
  }

  async function choose(mode) {
    const path = `/api/threads/${encodeURIComponent(S.threadId)}`;
    if (S.running) {
      // Mid-run: recorded now, applied at the agent's next step.
      const { ok, status, body } = await postJson(`${path}/mode`, { mode });
      if (!ok) {
        if (!authProblem(status)) showBanner(errorText(body.code, body.error));
        return;
      }
      S.selection = mode;
      renderMode();
      showBanner(body.message, "info");
      window.__events.push({ type: "MODE_REQUESTED", mode, at: performance.now() });
      return;
    }
    if (mode === "agent" && planActive()) {
      // The user's exit: cancel the plan now (journaled), withdrawing what waits for an answer.
      if (S.loading) return;
      const { ok, status, body } = await postJson(`${path}/leave-plan`, {});
      if (!ok) {
        if (!authProblem(status)) showBanner(errorText(body.code, body.error));
        return;
      }
      S.selection = null;
      await loadThread();
      showBanner(body.message, "info");
      broadcast("changed");
      window.__events.push({ type: "LEFT_PLAN", at: performance.now() });
      return;
    }
    S.selection = mode === threadSelection() ? null : mode;
    renderMode();
  }

  async function closePlan() {
    if (S.loading || S.running) return;
    const path = `/api/threads/${encodeURIComponent(S.threadId)}`;
    const { ok, status, body } = await postJson(`${path}/close-plan`, {});
    if (!ok) {
      if (!authProblem(status)) showBanner(errorText(body.code, body.error));
      return;
    }
    await loadThread();
    showBanner(body.message, "info");
    broadcast("changed");
    window.__events.push({ type: "CLOSED_PLAN", at: performance.now() });
  }

  function startNewThread() {
    S.threadId = randomId("t-");
    S.selection = null;
    remember();
    hideBanner();
    resetView();
    $("input").value = "";
    renderState();
    renderTimeline();
    renderCards();
  }

  async function start() {
    remember();
    trackScroll();
    renderState();
    renderTimeline();
    listenToOtherTabs();
    // Pasting a URL with a token or another thread into this tab only changes the hash.
    window.addEventListener("hashchange", () => {
      const next = new URLSearchParams(location.hash.slice(1));
      if (next.get("token") || (next.get("thread") && next.get("thread") !== S.threadId)) location.reload();
    });
    $("composer").addEventListener("submit", send);
    $("input").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) send(e);
    });
    $("input").addEventListener("input", saveDraft);
    $("stop").addEventListener("click", stopRun);
    $("threads-button").addEventListener("click", toggleThreads);
    document.addEventListener("keydown", (e) => {
      if (e.key === "Escape" && !$("thread-list").hidden) toggleThreads();
    });
    for (const button of document.querySelectorAll(".toggle button")) {
      button.addEventListener("click", () => choose(button.dataset.mode));
    }
    $("new-thread").addEventListener("click", () => {
      if (S.running) return;
      saveDraft();
      startNewThread();
      $("input").focus();
    });
    const info = await getJson("/api/info");
    if (authProblem(info.status)) return;
    if (info.ok) {
      $("model-info").textContent = info.body.model || "";
      $("model-info").title = info.body.workspace ? `workspace: ${info.body.workspace}` : "";
      if (info.body.workspace) {
        // Every thread of this server works on the same folder: say so before the first task.
        const note = $("workspace-note");
        note.textContent = `Every thread works on the same folder: ${info.body.workspace} (what one thread changed, the next one sees).`;
        note.hidden = false;
      }
      const sandbox = info.body.sandbox;
      if (sandbox) {
        $("sandbox-info").textContent = sandbox.available ? "sandboxed" : "⚠ no sandbox";
        $("sandbox-info").classList.toggle("warn", !sandbox.available);
        $("sandbox-info").title = sandbox.detail + (sandbox.fix ? ` — to fix: ${sandbox.fix}` : "");
      }
      if (info.body.stateKeys) S.keys = { ...S.keys, ...info.body.stateKeys };
    }
    await loadThread();
    restoreDraft();
    $("input").focus();
  }

  start();
})();
