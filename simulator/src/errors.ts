/** The simulator's user-facing failures: a message that says what to do, printed without a stack. */

export class SimulatorError extends Error {
  override readonly name: string = 'SimulatorError';
}

/** The broker refused one car's user name or password: that car's trouble, not the fleet's. */
export class RefusedCredentialError extends SimulatorError {
  override readonly name = 'RefusedCredentialError';
  readonly deviceId: string;

  constructor(deviceId: string, message: string) {
    super(message);
    this.deviceId = deviceId;
  }
}

interface ErrorWithCode {
  code?: unknown;
  message?: unknown;
}

/** MQTT 3.1.1 CONNACK return codes that mean the broker refused the credential. */
const refusedCredential = new Set([4, 5]);

const networkReasons: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'nothing listens there',
  ENOTFOUND: 'no such host',
  EAI_AGAIN: 'the host name does not resolve just now',
  ETIMEDOUT: 'it does not answer',
  EHOSTUNREACH: 'the host is unreachable',
  ECONNRESET: 'it closed the connection',
};

/** Whether the broker refused the car's user name or password (CONNACK 4 or 5). */
export function isRefusedCredential(error: unknown): boolean {
  const { code } = (error ?? {}) as ErrorWithCode;
  return typeof code === 'number' && refusedCredential.has(code);
}

/** The network's reason no connection was made (refused, no such host…), or undefined when it is another. */
export function describeUnreachable(error: unknown, mqttUrl: string): SimulatorError | undefined {
  const { code } = (error ?? {}) as ErrorWithCode;
  if (typeof code !== 'string' || !(code in networkReasons)) return undefined;
  return new SimulatorError(
    `cannot reach the broker at ${mqttUrl} (${networkReasons[code]}): is the service running, and is --mqtt-url right?`,
  );
}

/** Why one car could not connect, in the operator's words. */
export function describeConnectError(error: unknown, deviceId: string, mqttUrl: string): SimulatorError {
  const { code, message } = (error ?? {}) as ErrorWithCode;
  if (typeof code === 'number' && refusedCredential.has(code)) {
    return new RefusedCredentialError(
      deviceId,
      `car ${deviceId}: the broker at ${mqttUrl} refused its password: it is wrong, or it was rotated or the car decommissioned since the credentials were saved`,
    );
  }
  const unreachable = describeUnreachable(error, mqttUrl);
  if (unreachable) return unreachable;
  const detail = typeof message === 'string' && message !== '' ? message : String(error);
  return new SimulatorError(`car ${deviceId}: cannot connect to the broker at ${mqttUrl}: ${detail}`);
}
