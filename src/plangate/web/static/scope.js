// plangate web UI: the approved plan as a capability. What a plan's scope grants (files and
// globs it may write, command prefixes it may run, commands granted exactly as shown, the
// network for every command or for some), the reviewer's edit of it,
// the permission chosen at approval, and the cards for a call that needs more than the
// scope (an amendment), a file write under review ("ask for each edit") and a tool call the
// policy file asks about. Published as window.plangateScope for app.js; nothing here talks
// to the server: the server validates what is sent and says what is wrong.
"use strict";

(() => {
  const R = window.plangateRender;
  const el = R.el;

  const PERMISSIONS = {
    auto: ["Act within the scope", "What the scope covers runs; anything else waits for you as an amendment."],
    ask_each_edit: ["Ask me before each file edit", "Every file write waits for you, with its diff."],
  };

  function code(text) {
    return el("code", { text });
  }

  function lines(text) {
    return String(text || "")
      .split("\n")
      .map((line) => line.trim())
      .filter(Boolean);
  }

  // Every part of a scope, so an edit sends back what it did not touch: the commands an
  // approved amendment granted exactly as shown, and those granted the network alone.
  const LISTS = ["write", "commands", "exact_commands", "network_commands"];

  function normal(scope) {
    const s = scope || {};
    const out = {};
    for (const name of LISTS) out[name] = [...(s[name] || [])];
    out.network = Boolean(s.network);
    return out;
  }

  function union(a, b) {
    const x = normal(a);
    const y = normal(b);
    const out = {};
    for (const name of LISTS) out[name] = [...new Set([...x[name], ...y[name]])];
    out.network = x.network || y.network;
    return out;
  }

  // ---------------------------------------------------------------- reading a scope

  /** The scope as a list: each file or glob it may write, each command prefix, the network. */
  function scopeList(scope, label, asked) {
    // ``asked``: only what an amendment asks for, without the rows it leaves empty.
    const s = normal(scope);
    const row = (name, items, empty) =>
      el(
        "div",
        { class: "scope-row" },
        el("span", { class: "label", text: name }),
        items.length ? el("ul", { class: "scope-items" }, items.map((item) => el("li", {}, code(item)))) : el("span", { class: "muted", text: empty })
      );
    return el(
      "div",
      { class: "scope-list", role: "group", "aria-label": label || "Scope" },
      asked && !s.write.length ? null : row("May write", s.write, "no file"),
      asked && !s.commands.length ? null : row("May run", s.commands, "no command"),
      // Grants only amendments add: a row when there are any.
      s.exact_commands.length ? row("May run exactly", s.exact_commands, "") : null,
      asked && !s.network ? null : row("Network", [], s.network ? "yes" : "no"),
      s.network_commands.length ? row("Network only for", s.network_commands, "") : null
    );
  }

  /** The one-line summary (from the server) above the readable list. */
  function scopeFacts(scope, summary, label) {
    return el(
      "div",
      { class: "scope" },
      el("p", { class: "scope-summary", html: R.inlineHtml(summary || "") }),
      scope ? scopeList(scope, label) : null
    );
  }

  // ---------------------------------------------------------------- editing a scope

  /** The scope as three fields a reviewer edits; value() is what is sent when changed(). */
  function scopeEditor(scope, options) {
    const { label = "Edit the scope", onchange } = options || {};
    const start = normal(scope);
    const write = el("textarea", { class: "scope-write mono", rows: 3, spellcheck: "false", "aria-label": "Files and globs it may write, one a line" });
    const commands = el("textarea", { class: "scope-commands mono", rows: 2, spellcheck: "false", "aria-label": "Command prefixes it may run, one a line" });
    const exact = el("textarea", { class: "scope-exact mono", rows: 2, spellcheck: "false", "aria-label": "Commands it may run exactly as written, one a line" });
    const networkCommands = el("textarea", { class: "scope-network-commands mono", rows: 2, spellcheck: "false", "aria-label": "Commands that may use the network, one a line" });
    const network = el("input", { type: "checkbox", class: "scope-network" });
    write.value = start.write.join("\n");
    commands.value = start.commands.join("\n");
    exact.value = start.exact_commands.join("\n");
    networkCommands.value = start.network_commands.join("\n");
    network.checked = start.network;
    const value = () => ({
      write: lines(write.value),
      commands: lines(commands.value),
      exact_commands: lines(exact.value),
      network_commands: lines(networkCommands.value),
      network: network.checked,
    });
    const changed = () => JSON.stringify(value()) !== JSON.stringify(start);
    const marker = el("span", { class: "scope-edited", hidden: true, text: "edited" });
    const update = () => {
      marker.hidden = !changed();
      if (onchange) onchange();
    };
    for (const field of [write, commands, exact, networkCommands, network]) field.addEventListener("input", update);
    const node = el(
      "details",
      { class: "scope-editor" },
      el("summary", {}, label, " ", marker),
      el("label", { class: "tool-label" }, "Files and globs it may write (one a line; ", code("dir/"), " is the folder and all in it, ", code("**"), " any folders)"),
      write,
      el("label", { class: "tool-label" }, "Commands it may run (prefixes, one a line: ", code("python -m pytest"), " covers ", code("python -m pytest -q tests"), ")"),
      commands,
      el("label", { class: "tool-label" }, "Commands it may run exactly as written (one a line: ", code("rm -rf build"), " covers nothing longer)"),
      exact,
      el("label", { class: "scope-network-label" }, network, " It may use the network (every command)"),
      el("label", { class: "tool-label" }, "Or only these commands may use the network (exactly as written, one a line)"),
      networkCommands
    );
    return { node, value, changed };
  }

  // ---------------------------------------------------------------- the permission

  /** auto or ask_each_edit, chosen on the approval card. */
  function permissionChoice(options) {
    const name = `permission-${Math.random().toString(36).slice(2)}`;
    const offered = (options && options.length ? options : Object.keys(PERMISSIONS)).filter((o) => PERMISSIONS[o]);
    const inputs = offered.map((option, i) => el("input", { type: "radio", name, value: option, checked: i === 0 }));
    const node = el(
      "fieldset",
      { class: "permission" },
      el("legend", { text: "Once approved" }),
      offered.map((option, i) =>
        el("label", { class: "permission-option" }, inputs[i], el("span", {}, el("strong", { text: PERMISSIONS[option][0] }), el("span", { class: "muted", text: ` — ${PERMISSIONS[option][1]}` })))
      )
    );
    const value = () => (inputs.find((i) => i.checked) || inputs[0]).value;
    return { node, value };
  }

  // ---------------------------------------------------------------- request cards

  const REASONS = new Set(["scope_amendment", "edit_review", "tool_call"]);

  function title(interrupt) {
    const meta = interrupt.metadata || {};
    const path = (meta.wants && meta.wants.write && meta.wants.write[0]) || "";
    if (interrupt.reason === "scope_amendment") return `Amend the plan's scope? — revision ${meta.revision}`;
    if (interrupt.reason === "edit_review") return `Review this edit${path ? ` of ${path}` : ""}`;
    return "Allow this tool call?";
  }

  function patchView(meta, label) {
    if (!meta.diff) return null;
    return el(
      "div",
      { class: "scope-diff" },
      R.renderPatch(meta.diff, { label }),
      meta.diff_truncated ? el("p", { class: "muted", text: "The diff is cut short here; the file as written may hold more." }) : null
    );
  }

  /** The card of an amendment, an edit review or a tool call. ``reply(decision, extra)``
   * sends the answer; ``card(kind, title, ...children)`` draws the frame; ``scope()`` is
   * the plan's scope in force now. */
  function requestCard(interrupt, { card, reply, scope }) {
    const meta = interrupt.metadata || {};
    const amendment = interrupt.reason === "scope_amendment";
    const edit = interrupt.reason === "edit_review";
    const note = el("input", { type: "text", class: "note", placeholder: "Optional note for the agent", "aria-label": "Note" });
    // The reviewer edits what this amendment adds (a folder or a glob instead of one
    // file, say). It is added to the scope in force when they answer, which an amendment
    // approved just before in the same step may already have widened.
    const widened = amendment ? scopeEditor(meta.wants, { label: "Grant something else instead" }) : null;
    const extra = () => {
      const p = { revision: meta.revision, sha256: meta.sha256 };
      if (note.value.trim()) p.reviewer_note = note.value.trim();
      return p;
    };
    const approve = () => {
      const p = extra();
      if (widened && widened.changed()) p.scope = union(scope(), widened.value());
      reply("approve", p);
    };
    const labels = amendment ? ["Approve amendment", "Refuse"] : edit ? ["Approve edit", "Refuse edit"] : ["Allow", "Refuse"];
    const children = [el("p", { class: "request-text", html: R.inlineHtml(interrupt.message) })];
    if (amendment) {
      children.push(
        el("div", { class: "tool-label", text: "It asks for" }),
        scopeList(meta.wants, "What the amendment asks for", true),
        el("p", { class: "muted" }, `Why you are asked: the scope approved with revision ${meta.revision} does not cover this. `, el("span", { html: R.inlineHtml(meta.scope_summary || "") })),
        patchView(meta, `The write that waits: ${(meta.wants.write || [])[0] || ""}`),
        el("p", { class: "muted", text: "Approving records a new revision of the plan with the widened scope and lets this call run; refusing leaves everything as it is and tells the agent." }),
        widened.node
      );
    } else if (edit) {
      children.push(
        patchView(meta, `Edit of ${(meta.wants.write || [])[0] || "the file"}`) || el("p", { class: "muted", text: "No diff to show (a binary or very large file)." }),
        el("p", { class: "muted", text: "You chose to review each file edit. Approving lets this write run; refusing leaves the file as it is." })
      );
    }
    children.push(
      note,
      el(
        "div",
        { class: "actions sticky" },
        el("button", { type: "button", class: "primary", onclick: approve, text: labels[0] }),
        el("button", { type: "button", class: "danger", onclick: () => reply("reject", extra()), text: labels[1] })
      )
    );
    return card(amendment ? "amendment" : edit ? "edit-review" : "tool-call", title(interrupt), ...children);
  }

  // ---------------------------------------------------------------- decisions

  const REFUSALS = {
    SCOPE_AMENDMENT_REFUSED: "Refused the amendment",
    EDIT_REFUSED: "Refused the edit",
    TOOL_CALL_REFUSED: "Refused the tool call",
  };
  const APPROVALS = { amendment: "Approved the amendment", edit: "Approved the edit", tool: "Allowed the tool call" };

  /** The one-line decision on a call paused by the scope (null: not such a decision). */
  function decisionText(result) {
    if (!result || typeof result !== "object") return null;
    if (result.status === "rejected" && REFUSALS[result.code]) {
      return `${REFUSALS[result.code]}${result.reviewer_note ? `: ${result.reviewer_note}` : ""}`;
    }
    if (result.status === "approved" && APPROVALS[result.request]) {
      const scope = result.scope_summary ? ` — ${result.scope_summary.replace(/`/g, "")}` : "";
      return `${APPROVALS[result.request]}${scope}`;
    }
    return null;
  }

  const WAITING = new Set(["pending_amendment", "pending_edit", "pending_tool"]);

  /** Journal lines of scope requests and decisions (null: another kind). */
  function describe(entry) {
    const d = entry.detail || {};
    const what = d.wants && d.wants !== "nothing more" ? `: ${d.wants.replace(/`/g, "")}` : "";
    const decided = (verb) => ({ cls: d.outcome === "approved" ? "decision approve" : "decision reject", text: `${d.outcome === "approved" ? verb[0] : verb[1]}${what}${d.note ? ` — “${d.note}”` : ""}` });
    switch (entry.kind) {
      case "plan.amendment.requested":
        return { cls: "refusal", text: `Asked to amend the scope${what}` };
      case "plan.amendment":
        return decided(["Approved the amendment", "Refused the amendment"]);
      case "plan.edit.requested":
        return { cls: "", text: `Asked to review an edit${what}` };
      case "plan.edit":
        return decided(["Approved the edit", "Refused the edit"]);
      case "plan.tool.requested":
        return { cls: "", text: `Asked to call ${d.tool || "a tool"}` };
      case "plan.tool":
        return { cls: d.outcome === "approved" ? "decision approve" : "decision reject", text: `${d.outcome === "approved" ? "Allowed" : "Refused"} the call to ${d.tool || "a tool"}` };
      default:
        return null;
    }
  }

  window.plangateScope = { REASONS, WAITING, PERMISSIONS, scopeFacts, scopeList, scopeEditor, permissionChoice, requestCard, title, decisionText, describe };
})();
