/**
 * Whether the broker answers, asked before anything is provisioned: a car provisioned for a broker
 * that turns out unreachable is orphaned, its password (shown once) lost.
 */
import { randomBytes } from 'node:crypto';
import mqtt from 'mqtt';
import { describeUnreachable, isRefusedCredential, SimulatorError } from './errors.ts';

export interface BrokerAnswer {
  /**
   * The broker let in a client with no user name or password. The service's own broker never
   * does: this is likely another broker on that address (a system Mosquitto), where cars "work"
   * while the service sees none of them.
   */
  anonymousAccepted: boolean;
}

/** MQTT 3.1.1 CONNACK 3: the broker is there but cannot take connections just now. */
const serverUnavailable = 3;

/**
 * Connects once without a credential: a refusal (CONNACK 4 or 5) is the answer the service's
 * broker gives, and proves an MQTT broker listens there. Throws a SimulatorError saying what is
 * wrong otherwise.
 */
export async function checkBroker(mqttUrl: string, timeoutMs: number, ca?: Buffer): Promise<BrokerAnswer> {
  // A client id of its own: taking a car's would throw that car off the broker.
  const clientId = `svc-car-sim-check-${randomBytes(6).toString('hex')}`;
  try {
    const client = await mqtt.connectAsync(
      mqttUrl,
      {
        clientId,
        clean: true,
        protocolVersion: 4,
        connectTimeout: timeoutMs,
        reconnectPeriod: 0,
        ...(ca ? { ca } : {}),
      },
      false,
    );
    await client.endAsync(true);
    return { anonymousAccepted: true };
  } catch (error) {
    if (isRefusedCredential(error)) return { anonymousAccepted: false };
    throw describeCheckError(error, mqttUrl);
  }
}

function describeCheckError(error: unknown, mqttUrl: string): SimulatorError {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (code === serverUnavailable) {
    return new SimulatorError(
      `the broker at ${mqttUrl} says it is unavailable just now (its credential store does not answer?): try again shortly`,
    );
  }
  if (typeof code === 'number') {
    return new SimulatorError(
      `the broker at ${mqttUrl} refused to connect (MQTT return code ${code}): is --mqtt-url the MQTT address npm start printed?`,
    );
  }
  // A certificate that chains to a trusted CA but names another host: --ca would not help.
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return new SimulatorError(
      `the broker at ${mqttUrl} shows a certificate for another host name (${code}): use the name or address the certificate gives in --mqtt-url, or make its certificate name this one (subjectAltName)`,
    );
  }
  // Node's codes for a certificate it does not trust (SELF_SIGNED_CERT_IN_CHAIN, UNABLE_TO_VERIFY_LEAF_SIGNATURE, …).
  if (typeof code === 'string' && /CERT|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code)) {
    return new SimulatorError(
      `the broker at ${mqttUrl} shows a certificate this machine does not trust (${code}): pass the CA that signed it with --ca FILE`,
    );
  }
  const unreachable = describeUnreachable(error, mqttUrl);
  if (unreachable) return unreachable;
  const detail = typeof message === 'string' && message !== '' ? message : String(error);
  if (typeof code === 'string') return new SimulatorError(`cannot reach the broker at ${mqttUrl}: ${detail}`);
  // Something took the connection but sent no CONNACK: not an MQTT broker (the API's port?).
  return new SimulatorError(
    `the broker at ${mqttUrl} does not answer as an MQTT broker (${detail}): is --mqtt-url the MQTT address npm start printed?`,
  );
}
