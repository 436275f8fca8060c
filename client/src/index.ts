/** @svc/sdk: the public API of the SDK, one list of exports. */
export type { Brand } from '../../generated/brands.ts';
export { brands, nativeIdPatterns } from '../../generated/brands.ts';
export type { ApiClient, ApiClientOptions, components, Problem, paths } from './api-client.ts';
export { createApiClient, isProblem } from './api-client.ts';
export type { DeviceIdErrorCode, DeviceIdParts, ValidateDeviceIdOptions } from './device-id.ts';
export {
  DeviceIdError,
  deviceIdErrorCodes,
  formatDeviceId,
  fromTopicSegments,
  isBrand,
  isValidDeviceId,
  redactDeviceId,
  toTopicSegments,
  validateDeviceId,
} from './device-id.ts';
export type { CarTopicSuffix, DeviceTopic } from './device-topic.ts';
export { deviceTopic, parseDeviceTopic } from './device-topic.ts';
export type {
  IdentityTokenErrorCode,
  IdentityTokenKeySet,
  VerifiedIdentity,
  VerifyIdentityTokenOptions,
} from './identity-token.ts';
export {
  createIdentityTokenVerifier,
  IdentityTokenError,
  identityTokenErrorCodes,
  verifyIdentityToken,
} from './identity-token.ts';
export type { Version } from './semver.ts';
export { compareVersions, parseVersion } from './semver.ts';
export type { UnstorableText } from './text.ts';
export { describeUnstorableText, findUnstorableText } from './text.ts';
