/** Lint of asyncapi/: the AsyncAPI parser's diagnostics; any error or warning fails (`npm run lint:spec`). */
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Diagnostic, DiagnosticSeverity, fromFile, Parser } from '@asyncapi/parser';
import { repoRoot } from './repo-root.ts';

export type { Diagnostic };

/**
 * Every diagnostic the AsyncAPI parser reports for the document at `path`. Relative file `$ref`s
 * (such as the Brand schema under openapi/) resolve against `path`, which is why it is read from
 * the file rather than handed over as text.
 */
export async function lintAsyncApi(path: string): Promise<Diagnostic[]> {
  const { diagnostics } = await fromFile(new Parser(), path).parse();
  return diagnostics;
}

/** Warnings fail like errors: the contract is kept at zero of both. */
export function isFailing(diagnostic: Diagnostic): boolean {
  return diagnostic.severity <= DiagnosticSeverity.Warning;
}

export function formatDiagnostic(diagnostic: Diagnostic, root: string): string {
  const severity = DiagnosticSeverity[diagnostic.severity]?.toLowerCase() ?? String(diagnostic.severity);
  const file = diagnostic.source ? relative(root, diagnostic.source) : '<input>';
  const line = diagnostic.range.start.line + 1;
  const path = diagnostic.path.length > 0 ? diagnostic.path.join('.') : '(document)';
  return `${severity} ${file}:${line} ${path}: ${diagnostic.message} [${diagnostic.code}]`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const documentPath = `${repoRoot}/asyncapi/asyncapi.yaml`;
  const diagnostics = await lintAsyncApi(documentPath);
  for (const diagnostic of diagnostics) process.stderr.write(`${formatDiagnostic(diagnostic, repoRoot)}\n`);
  const failing = diagnostics.filter(isFailing).length;
  if (failing > 0) {
    process.stderr.write(`asyncapi/asyncapi.yaml: ${failing} error(s) or warning(s)\n`);
    process.exitCode = 1;
  } else {
    process.stdout.write('asyncapi/asyncapi.yaml: valid AsyncAPI, no errors or warnings\n');
  }
}
