/**
 * generated/patterns.ts: the string rules the contract states once (Version, Text, MultilineText),
 * as regular expressions for the code that must apply the same rule outside the validator.
 */
import { banner } from './banner.ts';
import type { OpenApiDocument } from './openapi-bundle.ts';

const shared = [
  {
    schema: 'Version',
    name: 'versionPattern',
    doc: "A semantic version 2.0.0, as the contract's Version schema.",
  },
  { schema: 'Text', name: 'textPattern', doc: 'One line of text with no control characters (Text).' },
  {
    schema: 'MultilineText',
    name: 'multilineTextPattern',
    doc: 'Text that may hold tabs and line breaks but no other control characters (MultilineText).',
  },
] as const;

function patternOf(doc: OpenApiDocument, schema: string): string {
  const node = doc.components?.schemas?.[schema] as { type?: unknown; pattern?: unknown } | undefined;
  const pattern = node?.pattern;
  if (
    node?.type !== 'string' ||
    typeof pattern !== 'string' ||
    !pattern.startsWith('^') ||
    !pattern.endsWith('$')
  ) {
    throw new Error(`openapi: components.schemas.${schema} must be a string with an anchored pattern`);
  }
  // The 'u' flag, as JSON Schema validators read patterns: code points, not UTF-16 units.
  new RegExp(pattern, 'u');
  return pattern;
}

export function generatePatterns(doc: OpenApiDocument): string {
  const lines = [banner('openapi/components/schemas/{Version,Text,MultilineText}.yaml')];
  for (const { schema, name, doc: comment } of shared) {
    const pattern = patternOf(doc, schema);
    lines.push(
      `/** ${comment} */`,
      `export const ${name}Source = ${JSON.stringify(pattern)};`,
      `export const ${name} = new RegExp(${name}Source, 'u');`,
      '',
    );
  }
  return lines.join('\n');
}
