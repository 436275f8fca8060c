/**
 * The broker the service runs with: the embedded one (aedes, in this process) or a Mosquitto it
 * manages through dynamic security. Either way the app gets the same four things.
 */
import { redactDeviceId } from '@svc/sdk';
import { parseCarTopic } from '../../../generated/mqtt.ts';
import type { BrokerAccounts } from './broker-accounts.ts';

/**
 * The broker named by MQTT_URL cannot be used as set up: the operator's to fix, said in one line
 * naming the settings (main.ts prints it and exits 2), never a stack.
 */
export class BrokerSetupError extends Error {}

/** A user name and password on the broker. */
export interface BrokerSignIn {
  username: string;
  password: string;
}

export interface ServiceBroker {
  /** How provisioning tells the broker of a credential made, rotated or revoked. */
  accounts: BrokerAccounts;
  /** The service's own sign-in, with the service's row of the ACL table (the bridge uses it). */
  serviceCredential: BrokerSignIn;
  /** Listens (embedded) or signs in (Mosquitto); resolves with the URL cars connect to. */
  start(): Promise<string>;
  /** Once started, where cars connect with TLS: the embedded broker's MQTT_TLS_PORT, if it has one. */
  readonly tlsUrl?: string;
  /** The cars signed in to this broker just now: the embedded one's, which this process holds. */
  signedInCars?(): number;
  /** Disconnects every client (embedded) or the service's own (Mosquitto). */
  stop(): Promise<void>;
}

/**
 * A topic as it may appear in a line of the log: a car topic with its native id redacted the way
 * `redactDeviceId` does it, anything else reduced to its first level (it may hold anything).
 */
export function redactTopic(topic: string): string {
  const car = parseCarTopic(topic);
  if (car) {
    const nativeId = redactDeviceId(`${car.brand}:${car.nativeId}`).slice(car.brand.length + 1);
    return `cars/${car.brand}/${nativeId}/${car.suffix}`;
  }
  return topic.includes('/') ? `${topic.split('/')[0]}/…` : '…';
}
