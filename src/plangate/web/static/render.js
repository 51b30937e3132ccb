// plangate web UI: output rendered for people. Markdown through markdown-it, sanitized by
// DOMPurify; line diffs through jsdiff; shell output as a terminal block; query results as
// a table plus a chart chosen from the result's shape (Vega-Lite through vega-embed, loaded
// on the first chart). All libraries are vendored under /static/vendor/ (no CDN).
// Published as window.plangateRender for app.js; nothing here talks to the server.
"use strict";

(() => {
  const VENDOR = new URL("vendor/", document.currentScript.src).href;
  const TERMINAL_LINES = 40; // shell output beyond this folds behind "Show all"
  const DIFF_ROWS = 80; // diff rows beyond this fold behind "Show all"
  const TABLE_ROWS = 50; // result rows beyond this fold behind "Show all"
  const CHART_MAX_ROWS = 1000;
  const DIFF_EDIT_LIMIT = 4000; // past this many edits jsdiff gives up: show a full replace

  // Characters a reader cannot see (controls, bidi overrides and isolates, zero-width and
  // other format characters, spaces other than the plain one) shown as markers -- \x1b,
  // \u202e, \u00a0 -- the same rules as plangate.plan.visible on the server: what the
  // reviewer approves is what they saw.
  const HIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Zs}]/gu;
  const KEPT = new Set(["\n", "\t", " ", "\u3000"]);

  function visible(text) {
    return String(text ?? "")
      .replace(/\r\n/g, "\n")
      .replace(HIDDEN, (c) => {
        if (KEPT.has(c)) return c;
        const code = c.codePointAt(0);
        if (code < 0x100 && /\p{Cc}/u.test(c)) return "\\x" + code.toString(16).padStart(2, "0");
        return code <= 0xffff ? "\\u" + code.toString(16).padStart(4, "0") : "\\U" + code.toString(16).padStart(8, "0");
      });
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = visible(value);
      else if (key === "html") node.innerHTML = value; // only ever sanitized output of this file
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(visible(child)));
    }
    return node;
  }

  // ---------------------------------------------------------------- Markdown

  const md = window.markdownit({ html: false, linkify: true, typographer: false });

  // Headings start at h3: the page and its panels own h1/h2.
  md.core.ruler.push("plangate_headings", (state) => {
    for (const token of state.tokens) {
      if (token.type === "heading_open" || token.type === "heading_close") {
        token.tag = `h${Math.min(Number(token.tag.slice(1)) + 2, 6)}`;
      }
    }
  });

  // "- [ ] step" / "- [x] step" as boxes (plans are written as task lists).
  md.core.ruler.push("plangate_tasks", (state) => {
    const tokens = state.tokens;
    for (let i = 2; i < tokens.length; i++) {
      if (tokens[i].type !== "inline" || tokens[i - 2].type !== "list_item_open") continue;
      const first = tokens[i].children && tokens[i].children[0];
      const match = first && first.type === "text" && first.content.match(/^\[([ xX])\]\s+/);
      if (match) first.content = (match[1].trim() ? "☑ " : "☐ ") + first.content.slice(match[0].length);
    }
  });

  // Column alignment as a class: the CSP forbids style attributes (even in inert markup
  // DOMPurify parses, Chromium reports them).
  md.core.ruler.push("plangate_align", (state) => {
    for (const token of state.tokens) {
      const style = token.attrGet && token.attrGet("style");
      const align = style && style.match(/text-align:(left|right|center)/);
      if (!style) continue;
      token.attrs = token.attrs.filter(([name]) => name !== "style");
      if (align) token.attrJoin("class", `align-${align[1]}`);
    }
  });

  // An image from model text becomes a link: the page loads nothing from elsewhere.
  md.renderer.rules.image = (tokens, idx) => {
    const token = tokens[idx];
    const alt = token.content || token.attrGet("src") || "image";
    return `<a href="${md.utils.escapeHtml(token.attrGet("src") || "")}">${md.utils.escapeHtml(alt)}</a>`;
  };

  // Wide tables wrap in their own box instead of widening the chat.
  md.renderer.rules.table_open = () => '<div class="table-wrap"><table>\n';
  md.renderer.rules.table_close = () => "</table></div>\n";

  DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
      // A link shows where it leads: a label such as "Approve" cannot hide an off-site
      // target.
      const href = node.getAttribute("href");
      if (node.textContent.trim() !== href) node.append(document.createTextNode(` (${href})`));
    }
  });

  const PURIFY = { USE_PROFILES: { html: true }, FORBID_TAGS: ["img", "style", "form", "input", "button", "textarea", "select"], FORBID_ATTR: ["style"] };

  function sanitize(html) {
    return DOMPurify.sanitize(html, PURIFY);
  }

  /** Sanitized HTML of a Markdown document. */
  function markdownHtml(source) {
    return sanitize(md.render(visible(source)));
  }

  /** Sanitized HTML of one line of Markdown (no paragraph). */
  function inlineHtml(source) {
    return sanitize(md.renderInline(visible(source)));
  }

  function setMarkdown(node, source) {
    node.innerHTML = markdownHtml(source);
  }

  // ---------------------------------------------------------------- diffs

  /** Rows {op: "add"|"del"|"ctx", text} of a line diff of two texts. */
  function diffRows(before, after) {
    const a = String(before ?? "");
    const b = String(after ?? "");
    const parts = Diff.diffLines(a, b, { maxEditLength: DIFF_EDIT_LIMIT });
    const rows = [];
    const push = (op, value) => {
      for (const text of value.replace(/\n$/, "").split("\n")) rows.push({ op, text });
    };
    if (!parts) {
      // Too different to diff cheaply: show it as a replacement.
      if (a) push("del", a);
      if (b) push("add", b);
      return rows;
    }
    for (const part of parts) push(part.added ? "add" : part.removed ? "del" : "ctx", part.value);
    return rows;
  }

  function showMore(hidden, noun, reveal) {
    const button = el("button", { type: "button", class: "small ghost show-all", text: `Show all (${hidden} more ${noun})` });
    button.addEventListener("click", () => {
      reveal();
      button.remove();
    });
    return button;
  }

  /** Changed lines with a little context; long unchanged stretches fold into one line.
   * options: context (lines), label (names the region), scroll (a focusable scroll box
   * for cards; tool blocks fold instead, so they add no tab stop of their own). */
  function renderDiff(before, after, options) {
    return drawRows(diffRows(before, after), options);
  }

  /** Rows of a unified diff (a file write waiting for review), parsed by jsdiff; each
   * hunk starts with its line numbers. */
  function patchRows(patch) {
    const rows = [];
    for (const file of Diff.parsePatch(String(patch ?? ""))) {
      for (const hunk of file.hunks) {
        rows.push({ op: "hunk", text: `@@ -${hunk.oldStart},${hunk.oldLines} +${hunk.newStart},${hunk.newLines} @@` });
        for (const line of hunk.lines) {
          if (line.startsWith("\\")) continue; // "\ No newline at end of file"
          const op = line[0] === "+" ? "add" : line[0] === "-" ? "del" : "ctx";
          rows.push({ op, text: line.slice(1) });
        }
      }
    }
    return rows;
  }

  function renderPatch(patch, options) {
    return drawRows(patchRows(patch), { context: Infinity, ...(options || {}) });
  }

  function drawRows(rows, options) {
    const { context = 2, label = "Changes", scroll = true } = options || {};
    const attrs = { class: `diff${scroll ? " scroll" : ""}`, role: "region", "aria-label": label };
    if (scroll) attrs.tabindex = "0";
    const box = el("div", attrs);
    const changed = rows.map((r) => r.op === "add" || r.op === "del");
    if (!changed.some(Boolean)) {
      box.append(el("div", { class: "diff-none", text: "No changes." }));
      return box;
    }
    const near = rows.map((_, i) => changed.slice(Math.max(0, i - context), i + context + 1).some(Boolean));
    const lines = [];
    let folded = 0;
    const fold = () => {
      if (folded) lines.push(el("div", { class: "diff-fold", text: `⋯ ${folded} unchanged line${folded > 1 ? "s" : ""}` }));
      folded = 0;
    };
    rows.forEach((row, i) => {
      if (!near[i]) {
        folded += 1;
        return;
      }
      fold();
      if (row.op === "hunk") {
        lines.push(el("div", { class: "diff-fold", text: row.text }));
        return;
      }
      const sign = row.op === "add" ? "+" : row.op === "del" ? "−" : " ";
      const what = row.op === "add" ? "added: " : row.op === "del" ? "removed: " : "";
      lines.push(
        el(
          "div",
          { class: `diff-line ${row.op}` },
          el("span", { class: "diff-sign", "aria-hidden": "true", text: sign }),
          what ? el("span", { class: "sr-only", text: what }) : null,
          row.text || " "
        )
      );
    });
    fold();
    const limit = scroll ? Infinity : DIFF_ROWS;
    box.append(...lines.slice(0, limit));
    if (lines.length > limit) {
      const rest = lines.slice(limit);
      box.append(showMore(rest.length, "lines", () => box.append(...rest)));
    }
    return box;
  }

  // ---------------------------------------------------------------- tool results

  function fileHeader(verb, path, extra) {
    return el("div", { class: "file-head" }, el("span", { class: "file-verb", text: verb }), el("code", { class: "file-path", text: path || "?" }), extra ? el("span", { class: "muted", text: extra }) : null);
  }

  function editView(args, result) {
    const path = result.path || args.path;
    const count = result.replacements;
    const extra = count > 1 ? `${count} places` : "";
    return el("div", { class: "file-edit" }, fileHeader("edited", path, extra), renderDiff(args.old_string, args.new_string, { label: `Edit of ${path}`, scroll: false, context: 3 }));
  }

  function writeView(args, result) {
    const path = result.path || args.path;
    const created = result.created !== false;
    const extra = created ? `${result.bytes_written} bytes` : `${result.bytes_written} bytes; the earlier content is not shown`;
    return el("div", { class: "file-edit" }, fileHeader(created ? "created" : "rewrote", path, extra), renderDiff("", args.content, { label: `Content written to ${path}`, scroll: false }));
  }

  function outputBlock(kind, text) {
    const lines = String(text).replace(/\n$/, "").split("\n");
    const pre = el("pre", { class: `term-${kind}` });
    if (lines.length <= TERMINAL_LINES) {
      pre.textContent = lines.join("\n");
      return [pre];
    }
    // Show the tail (where test summaries and errors are); the head is one click away.
    const hidden = lines.length - TERMINAL_LINES;
    pre.textContent = lines.slice(hidden).join("\n");
    return [showMore(hidden, "lines", () => (pre.textContent = lines.join("\n"))), pre];
  }

  function bashView(args, result) {
    const command = String(args.command || "");
    const exit = result.exit_code;
    const box = el(
      "div",
      { class: "term", role: "group", "aria-label": `Shell output of ${command.slice(0, 80)}` },
      el("div", { class: "term-cmd" }, el("span", { class: "term-prompt", "aria-hidden": "true", text: "$ " }), command)
    );
    if (result.stdout) box.append(...outputBlock("out", result.stdout));
    if (result.stderr) box.append(...outputBlock("err", result.stderr));
    const status = exit === null || exit === undefined ? "no exit code (stopped)" : `exit ${exit}`;
    box.append(el("div", { class: `term-exit${exit === 0 ? " ok" : " bad"}`, text: result.truncated ? `${status} · output cut` : status }));
    return box;
  }

  // ---------------------------------------------------------------- data results

  const NUMERIC = /^(TINYINT|SMALLINT|INTEGER|INT|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|FLOAT|DOUBLE|DECIMAL|REAL|NUMERIC|NUMBER)\b/;
  const TEMPORAL = /^(DATE|TIMESTAMP|TIME)\b/;
  const YEAR_MONTH = /^\d{4}-(0[1-9]|1[0-2])$/;
  const ISO_DATE = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

  /** What each column holds: "number", "time" (dates), "ordered" (year-months, sorted as
   * text) or "category". From the SQL types when given, else from the values. */
  function columnKinds(columns, types, rows) {
    return columns.map((name, i) => {
      const type = String((types || [])[i] || "").toUpperCase();
      const values = rows.map((row) => row[name]).filter((v) => v !== null && v !== undefined);
      if (!values.length) return "category";
      if (NUMERIC.test(type) || (!type && values.every((v) => typeof v === "number"))) return "number";
      if (values.every((v) => typeof v === "string" && YEAR_MONTH.test(v))) return "ordered";
      if (TEMPORAL.test(type) || values.every((v) => typeof v === "string" && ISO_DATE.test(v))) return "time";
      return "category";
    });
  }

  function distinct(rows, fields) {
    return new Set(rows.map((row) => JSON.stringify(fields.map((f) => row[f])))).size;
  }

  // Vega-Lite reads dots and brackets in a field name as a path: escape them.
  function fieldRef(name) {
    return String(name).replace(/[.[\]\\]/g, "\\$&");
  }

  /** The chart that fits a result's shape, or null: a line for time or ordered values plus
   * a number, a bar for a category plus a number, nothing otherwise (too few rows, a cut-off
   * result, no number, or rows that a chart would silently merge). */
  function chartFor(result) {
    const columns = Array.isArray(result.columns) ? result.columns.map(String) : [];
    const rows = Array.isArray(result.rows) ? result.rows.filter((r) => r && typeof r === "object") : [];
    if (result.truncated || rows.length < 2 || rows.length > CHART_MAX_ROWS || columns.length < 2) return null;
    const kinds = columnKinds(columns, result.column_types, rows);
    const of = (kind) => columns.filter((_, i) => kinds[i] === kind);
    const numbers = of("number");
    const timeLike = [...of("time"), ...of("ordered")];
    const categories = of("category");
    let mark;
    let x;
    if (timeLike.length && numbers.length) {
      mark = "line";
      x = timeLike[0];
    } else if (categories.length && numbers.length) {
      mark = "bar";
      x = categories[0];
    } else {
      return null;
    }
    const y = numbers[0];
    let color = null;
    if (distinct(rows, [x]) < rows.length) {
      // Several rows per x: a second category splits them, or the chart would merge them.
      color = categories.find((c) => c !== x && distinct(rows, [c]) <= 12 && distinct(rows, [x, c]) === rows.length);
      if (!color) return null;
    }
    if (mark === "bar" && distinct(rows, [x]) > 60) return null;
    const xKind = kinds[columns.indexOf(x)];
    const xType = xKind === "time" ? "temporal" : "ordinal";
    const encoding = {
      x: { field: fieldRef(x), type: mark === "bar" ? "nominal" : xType, title: x, sort: mark === "bar" ? null : "ascending", axis: { labelAngle: mark === "bar" ? 0 : -40, labelLimit: 120 } },
      y: { field: fieldRef(y), type: "quantitative", title: y },
      tooltip: columns.map((c, i) => ({ field: fieldRef(c), type: kinds[i] === "number" ? "quantitative" : "nominal", title: c })),
    };
    if (xType === "temporal") encoding.x.scale = { type: "utc" };
    if (color) encoding.color = { field: fieldRef(color), type: "nominal", title: color };
    if (mark === "bar" && color) encoding.xOffset = { field: fieldRef(color) };
    const kind = mark === "bar" ? "Bar chart" : "Line chart";
    return {
      mark,
      description: `${kind} of ${y} by ${x}${color ? ` and ${color}` : ""}`,
      spec: {
        description: `${kind} of ${y} by ${x}${color ? ` and ${color}` : ""}`,
        data: { values: rows },
        mark: mark === "line" ? { type: "line", point: true } : { type: "bar" },
        encoding,
        width: "container",
        height: 220,
        autosize: { type: "fit", contains: "padding" },
      },
    };
  }

  // Spreadsheets run cells that start with = + - @ as formulas: prefix those texts.
  function csvCell(value) {
    if (value === null || value === undefined) return "";
    let text = typeof value === "object" ? JSON.stringify(value) : String(value);
    if (typeof value === "string" && /^[=+\-@\t\r]/.test(text)) text = `'${text}`;
    return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
  }

  /** RFC 4180 CSV of a result (header row first, CRLF line ends). */
  function toCsv(columns, rows) {
    const lines = [columns.map(csvCell).join(",")];
    for (const row of rows) lines.push(columns.map((c) => csvCell(row[c])).join(","));
    return lines.join("\r\n") + "\r\n";
  }

  function download(href, filename) {
    const link = el("a", { href, download: filename, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
  }

  function fileStem(result) {
    const id = String(result.query_id || result.table || "result").replace(/[^A-Za-z0-9_-]+/g, "_");
    return `plangate-${id}`.slice(0, 80);
  }

  let vegaLoading = null;

  // vega is ~800 kB: load it the first time a chart is drawn, in dependency order.
  function loadVega() {
    if (!vegaLoading) {
      const files = ["vega.min.js", "vega-lite.min.js", "vega-interpreter.js", "vega-embed.min.js"];
      vegaLoading = files.reduce(
        (previous, file) =>
          previous.then(
            () =>
              new Promise((resolve, reject) => {
                const script = el("script", { src: VENDOR + file });
                script.addEventListener("load", resolve);
                script.addEventListener("error", () => reject(new Error(`could not load ${file}`)));
                document.head.append(script);
              })
          ),
        Promise.resolve()
      );
      vegaLoading.catch(() => (vegaLoading = null));
    }
    return vegaLoading;
  }

  async function drawChart(box, chart) {
    await loadVega();
    const embedded = await window.vegaEmbed(box, chart.spec, {
      mode: "vega-lite",
      renderer: "canvas",
      actions: false,
      // The page's CSP forbids eval and inline styles: interpret expressions, style in app CSS.
      ast: true,
      expr: window.vegaInterpreter.expressionInterpreter,
      defaultStyle: false,
      tooltip: { disableDefaultStyle: true },
    });
    box.setAttribute("role", "img");
    box.setAttribute("aria-label", chart.description);
    return embedded.view;
  }

  function tableOf(columns, rows, kinds, label) {
    const body = el("tbody");
    const cell = (value) => {
      if (value === null || value === undefined) return "";
      if (typeof value === "number") return value.toLocaleString(undefined, { maximumFractionDigits: 6 });
      return typeof value === "object" ? JSON.stringify(value) : String(value);
    };
    const row = (r) => el("tr", {}, columns.map((c, i) => el("td", { class: kinds[i] === "number" ? "num" : null, text: cell(r[c]) })));
    body.append(...rows.slice(0, TABLE_ROWS).map(row));
    const table = el("table", { class: "result-table" }, el("thead", {}, el("tr", {}, columns.map((c) => el("th", { scope: "col", text: c })))), body);
    // A focusable box: wide results scroll sideways here, never the page.
    const wrap = el("div", { class: "result-scroll", role: "region", tabindex: "0", "aria-label": label }, table);
    const parts = [wrap];
    if (rows.length > TABLE_ROWS) parts.push(showMore(rows.length - TABLE_ROWS, "rows", () => body.append(...rows.slice(TABLE_ROWS).map(row))));
    return parts;
  }

  /** A query result as a table, a chart when its shape fits, and CSV / PNG downloads. */
  function dataView(result) {
    const columns = Array.isArray(result.columns) ? result.columns.map(String) : [];
    const rows = Array.isArray(result.rows) ? result.rows.filter((r) => r && typeof r === "object") : [];
    if (!columns.length) return null;
    const name = result.query_id ? `query ${result.query_id}` : result.table ? `table ${result.table}` : "result";
    const count = `${rows.length} row${rows.length === 1 ? "" : "s"}${result.truncated ? ", cut off" : ""}`;
    const kinds = columnKinds(columns, result.column_types, rows);
    const chart = chartFor(result);
    const box = el("div", { class: "data-result" });
    const chartBox = chart ? el("div", { class: "chart", "data-mark": chart.mark }) : null;
    const csv = el("button", { type: "button", class: "small", text: "Download CSV" }, el("span", { class: "sr-only", text: ` of ${name}` }));
    csv.addEventListener("click", () => {
      const url = URL.createObjectURL(new Blob([toCsv(columns, rows)], { type: "text/csv;charset=utf-8" }));
      download(url, `${fileStem(result)}.csv`);
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    });
    const actions = el("div", { class: "data-actions" }, el("span", { class: "muted", text: count }), csv);
    box.append(actions);
    if (chartBox) {
      const png = el("button", { type: "button", class: "small", text: "Download PNG", disabled: true }, el("span", { class: "sr-only", text: ` chart of ${name}` }));
      actions.append(png);
      box.append(chartBox);
      drawChart(chartBox, chart).then(
        (view) => {
          png.disabled = false;
          png.addEventListener("click", async () => download(await view.toImageURL("png", 2), `${fileStem(result)}.png`));
          box.dataset.chart = "ready";
        },
        (error) => {
          chartBox.replaceChildren(el("p", { class: "muted", text: `The chart could not be drawn: ${error.message}` }));
          box.dataset.chart = "failed";
        }
      );
    }
    box.append(...tableOf(columns, rows, kinds, `Result of ${name}: ${count}`));
    return box;
  }

  /** The people's view of a finished tool call, or null when the summary line says it all. */
  function toolView(name, args, result) {
    if (!result || typeof result !== "object" || typeof result.error === "string") {
      // Errors stay one line, except a shell command that ran (a timeout keeps its output).
      if (!(name === "Bash" && result && ("stdout" in result || "stderr" in result))) return null;
    }
    args = args && typeof args === "object" ? args : {};
    if (name === "Edit" && "replacements" in result) return editView(args, result);
    if (name === "Write" && "bytes_written" in result) return writeView(args, result);
    if (name === "Bash" && "exit_code" in result) return bashView(args, result);
    if ((name === "run_sql_readonly" || name === "preview_table") && Array.isArray(result.rows)) return dataView(result);
    return null;
  }

  window.plangateRender = { el, visible, markdownHtml, inlineHtml, setMarkdown, renderDiff, renderPatch, diffRows, patchRows, toolView, chartFor, toCsv, loadVega };
})();
