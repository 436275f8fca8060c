/** @svc/car-simulator: simulated cars for tests, benchmarks and demos. */
export type { CarCredential, InstalledApp, SimulatedCar } from './car.ts';
export { type CliContext, runCli } from './cli.ts';
export {
  createCredentialsFile,
  type NewCredentialsFile,
  readCredentialsFile,
  writeCredentialsFile,
} from './credentials.ts';
export { RefusedCredentialError, SimulatorError } from './errors.ts';
export { type ProvisionOptions, provisionCars } from './provisioning.ts';
export { munichRing, Route, type Waypoint } from './route.ts';
export {
  defaultMqttUrl,
  type Simulator,
  type SimulatorOptions,
  startSimulator,
  type TextSink,
} from './simulator.ts';
