// Lint every Neo4j Cypher statement under cypher/neo4j with Neo4j's own parser and semantic
// analysis (@neo4j-cypher/language-support, pinned in package.json). Files are split into
// statements exactly as talent_core/store/cypher.py does (`//` comment lines dropped, then
// split on `;`); comment lines are blanked rather than removed so reported lines match the
// file. Missing-parameter warnings are expected (no database schema is given) and filtered
// with isNotParamError. Prints `file:line:col: severity: message`; exits 1 on any error.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isNotParamError, lintCypherQuery } from '@neo4j-cypher/language-support';

const root = join(fileURLToPath(import.meta.url), '..', '..');
const dir = process.argv[2] ?? join(root, 'cypher', 'neo4j');
const ERROR = 1; // vscode-languageserver DiagnosticSeverity.Error

const files = readdirSync(dir).filter((f) => f.endsWith('.cypher')).sort();
if (files.length === 0) {
  console.error(`${dir}: no .cypher files`);
  process.exit(1);
}

let errors = 0;
let statements = 0;
for (const name of files) {
  const path = join(dir, name);
  const shown = relative(process.cwd(), path) || path;
  const text = readFileSync(path, 'utf8')
    .split('\n')
    .map((line) => (line.trimStart().startsWith('//') ? '' : line))
    .join('\n');
  let line0 = 0; // line of the file where the current statement starts (0-based)
  for (const chunk of text.split(';')) {
    const startLine = line0;
    line0 += chunk.split('\n').length - 1;
    if (chunk.trim() === '') continue;
    statements += 1;
    const { diagnostics } = lintCypherQuery(chunk, {});
    for (const d of diagnostics.filter(isNotParamError)) {
      const isError = d.severity === ERROR;
      if (isError) errors += 1;
      const where = `${shown}:${startLine + d.range.start.line + 1}:${d.range.start.character + 1}`;
      const message = d.message.replace(/\s+/g, ' ').trim();
      console.log(`${where}: ${isError ? 'error' : 'warning'}: ${message}`);
    }
  }
}
console.log(`${statements} statements in ${files.length} files: ${errors} error(s)`);
process.exit(errors > 0 ? 1 : 0);
