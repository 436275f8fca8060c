/**
 * Where the service finds what `npm run build` makes beside it: the reference page, the SDK's
 * browser runtime, the web console, and the bundled contracts. Reckoned from the `server/` folder,
 * which this module finds one level above itself both as source (`server/src/built-files.ts`) and
 * in the production build (everything bundled into `server/dist/main.js`): a path relative to any
 * other module would break once bundled.
 */
import { fileURLToPath } from 'node:url';

const serverDir = fileURLToPath(new URL('..', import.meta.url));
const repoDir = fileURLToPath(new URL('../..', import.meta.url));

/** The reference page served at /docs (scripts/build-docs.ts). */
export const docsDir = `${serverDir}dist/docs`;

/** The browser build of `@svc/sdk/runtime` served at /_svc/sdk.js (scripts/build-sdk.ts). */
export const sdkScriptFile = `${repoDir}client/dist/runtime.browser.js`;

/** The web console served at /console (scripts/build-console.ts). */
export const consoleDir = `${repoDir}console/dist`;

/** The bundled contract, committed in `generated/`. */
export const contractFile = `${repoDir}generated/openapi.json`;

/** The bundled MQTT contract, committed in `generated/`, as YAML and as JSON (one document). */
export const asyncContractFiles = {
  yaml: `${repoDir}generated/asyncapi.yaml`,
  json: `${repoDir}generated/asyncapi.json`,
};
