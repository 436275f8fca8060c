/** generated/openapi.ts: paths, components and operations types, by openapi-typescript. */
import openapiTS, { astToString } from 'openapi-typescript';
import { banner } from './banner.ts';
import type { OpenApiDocument } from './openapi-bundle.ts';

export async function generateOpenApiTypes(doc: OpenApiDocument): Promise<string> {
  // openapi-typescript takes the parsed document; the bundle has no external $refs left.
  const ast = await openapiTS(doc as unknown as Parameters<typeof openapiTS>[0], {
    alphabetize: false,
    immutable: false,
  });
  return `${banner('openapi/ (bundled)')}${astToString(ast)}`;
}
