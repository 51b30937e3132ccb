#!/usr/bin/env bash
# Refresh the browser libraries vendored into the web UI (no CDN at run time).
#
# Fetches the pinned major versions with npm into a temporary directory and copies the
# minified browser builds and their licences into src/plangate/web/static/vendor/ (axe-core,
# used only by the browser tests, into tests/vendor/). Run it from the repository root, then
# review the diff and run tests/test_web_render.py.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
vendor="$root/src/plangate/web/static/vendor"
testvendor="$root/tests/vendor"
packages=(markdown-it@15 dompurify@3 diff@9 vega@6 vega-lite@6 vega-embed@7 vega-interpreter@2 axe-core@4)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
npm init -y >/dev/null
npm install --no-audit --no-fund --ignore-scripts "${packages[@]}" >/dev/null
nm="$work/node_modules"

rm -rf "$vendor" "$testvendor"
mkdir -p "$vendor/licenses" "$testvendor"
cp "$nm/markdown-it/dist/browser/markdown-it.umd.min.js" "$vendor/markdown-it.min.js"
cp "$nm/dompurify/dist/purify.min.js" "$vendor/purify.min.js"
cp "$nm/diff/dist/diff.min.js" "$vendor/diff.min.js"
cp "$nm/vega/build/vega.min.js" "$vendor/vega.min.js"
cp "$nm/vega-lite/build/vega-lite.min.js" "$vendor/vega-lite.min.js"
cp "$nm/vega-embed/build/vega-embed.min.js" "$vendor/vega-embed.min.js"
cp "$nm/axe-core/axe.min.js" "$testvendor/axe.min.js"
cp "$nm/axe-core/LICENSE" "$testvendor/axe-core-LICENSE.txt"
node -p "'axe-core ' + require('$nm/axe-core/package.json').version + ' (MPL-2.0), for the accessibility checks of the browser tests'" >"$testvendor/VERSION.txt"

# vega-interpreter ships only as an ES module importing three helpers from vega-util. The
# page loads classic scripts, so wrap it: take the helpers from the vega global (the vega
# build exports them) and publish the interpreter as the vegaInterpreter global. It lets
# vega evaluate expressions without eval/new Function, so the page's CSP can stay strict.
{
  echo "// vega-interpreter $(node -p "require('$nm/vega-interpreter/package.json').version") (BSD-3-Clause), wrapped by scripts/vendor-web-assets.sh"
  echo "(function () {"
  echo "const { ascending, isString, DisallowedObjectProperties } = globalThis.vega;"
  grep -v -e "^import " -e "^export " -e "sourceMappingURL" "$nm/vega-interpreter/build/vega-interpreter.js"
  echo "globalThis.vegaInterpreter = { expressionInterpreter: expression };"
  echo "})();"
} >"$vendor/vega-interpreter.js"

for name in markdown-it dompurify diff vega vega-lite vega-embed vega-interpreter; do
  cp "$nm/$name/LICENSE" "$vendor/licenses/$name-LICENSE.txt"
done

# The builds bundle their dependencies (d3 modules in vega, linkify-it and entities in
# markdown-it, …): keep every licence of the installed production tree in one file.
node - "$nm" >"$vendor/licenses/THIRD-PARTY.txt" <<'JS'
const fs = require("fs"), path = require("path");
const nm = process.argv[2];
const dirs = [];
for (const entry of fs.readdirSync(nm).sort()) {
  if (entry.startsWith(".")) continue;
  if (entry.startsWith("@")) for (const sub of fs.readdirSync(path.join(nm, entry)).sort()) dirs.push(path.join(entry, sub));
  else dirs.push(entry);
}
console.log("Licences of the npm packages installed with the vendored libraries (their bundled");
console.log("dependencies; a few, such as command-line helpers, are not part of the browser builds).\n");
for (const dir of dirs) {
  const pkg = JSON.parse(fs.readFileSync(path.join(nm, dir, "package.json"), "utf8"));
  const file = fs.readdirSync(path.join(nm, dir)).find((f) => /^(licen[cs]e|copying)/i.test(f));
  console.log("=".repeat(78));
  console.log(`${pkg.name} ${pkg.version} — ${pkg.license || "see below"}`);
  console.log("=".repeat(78));
  console.log(file ? fs.readFileSync(path.join(nm, dir, file), "utf8").trim() : "(no licence file in the package)");
  console.log();
}
JS

node - "$nm" >"$vendor/manifest.json" <<'JS'
const fs = require("fs"), path = require("path");
const nm = process.argv[2];
const files = {
  "markdown-it": "markdown-it.min.js", dompurify: "purify.min.js", diff: "diff.min.js",
  vega: "vega.min.js", "vega-lite": "vega-lite.min.js", "vega-embed": "vega-embed.min.js",
  "vega-interpreter": "vega-interpreter.js",
};
const out = {};
for (const [name, file] of Object.entries(files)) {
  const pkg = JSON.parse(fs.readFileSync(path.join(nm, name, "package.json"), "utf8"));
  out[name] = { version: pkg.version, license: pkg.license, file, licenseFile: `licenses/${name}-LICENSE.txt` };
}
console.log(JSON.stringify(out, null, 2));
JS
echo "vendored into $vendor:"
cat "$vendor/manifest.json"
