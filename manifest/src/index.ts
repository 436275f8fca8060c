/**
 * `@svc/manifest`: the rules of a mini-app's `manifest.json` and package folder, stated once for
 * svc (`svc publish`), the service (its package check) and the dev-server.
 */
export { supportedBrands, supportsBrand } from './brands.ts';
export { entryPathFault } from './entry-path.ts';
export { closestManifestField, manifestFields } from './field-names.ts';
export { checkNetwork, type NetworkProblem, originFaults, originRule } from './origins.ts';
export {
  ignoreFileName,
  leftOutBy,
  manifestFileName,
  noPackageIgnore,
  type PackageIgnore,
  parsePackageIgnore,
} from './package-ignore.ts';
export {
  describeManifestErrors,
  type ManifestProblem,
  manifestProblemAt,
  sayManifestProblem,
} from './problems.ts';
export { checkManifestSchema, type Manifest } from './schema.ts';
export { showValue } from './show-value.ts';
