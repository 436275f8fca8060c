/**
 * Lint of asyncapi/ (`npm run lint:spec`): the AsyncAPI parser's diagnostics, where any error or
 * warning fails, and the document's examples (scripts/spec-examples.ts), each of which must be there
 * and valid.
 */
import { relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Diagnostic, DiagnosticSeverity, fromFile, Parser } from '@asyncapi/parser';
import { repoRoot } from './repo-root.ts';
import { asyncApiExampleProblems, type ExampleProblem } from './spec-examples.ts';

export type { Diagnostic };

/**
 * Every diagnostic the AsyncAPI parser reports for the document at `path`. Relative file `$ref`s
 * (such as the Brand schema under openapi/) resolve against `path`, which is why it is read from
 * the file rather than handed over as text.
 */
export async function lintAsyncApi(path: string): Promise<Diagnostic[]> {
  return (await lintAsyncApiContract(path)).diagnostics;
}

/** The parser's diagnostics and, when the document parses, what is wrong with its examples. */
export async function lintAsyncApiContract(
  path: string,
): Promise<{ diagnostics: Diagnostic[]; examples: ExampleProblem[] }> {
  const { document, diagnostics } = await fromFile(new Parser(), path).parse();
  const examples = document ? asyncApiExampleProblems(document.json() as Record<string, unknown>) : [];
  return { diagnostics, examples };
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
  // Another root (a copy of the repository's contract) is for the tests.
  const root = process.argv[2] ? resolve(process.argv[2]) : repoRoot;
  const documentPath = `${root}/asyncapi/asyncapi.yaml`;
  const { diagnostics, examples } = await lintAsyncApiContract(documentPath);
  for (const diagnostic of diagnostics) process.stderr.write(`${formatDiagnostic(diagnostic, root)}\n`);
  for (const problem of examples)
    process.stderr.write(`example: ${problem.message}\n  at #${problem.pointer}\n`);
  const failing = diagnostics.filter(isFailing).length + examples.length;
  if (failing > 0) {
    process.stderr.write(`asyncapi/asyncapi.yaml: ${failing} error(s) or warning(s)\n`);
    process.exitCode = 1;
  } else {
    process.stdout.write(
      'asyncapi/asyncapi.yaml: valid AsyncAPI, no errors or warnings, every example valid\n',
    );
  }
}
