/**
 * The two brokers a service can run with, each started for one test file: the embedded broker, and
 * a Mosquitto of the test's own managed through dynamic security. Each comes with an observer: a
 * sign-in with the service's row of the ACL table, that sees the car topics and sends commands.
 */
import { serviceUsername } from '../../src/broker/embedded-broker.ts';
import type { BrokerUnderTest } from './broker-acl.ts';
import { startMosquitto } from './mosquitto.ts';
import { startTestService } from './service.ts';

export async function startEmbeddedUnderTest(
  env: Record<string, string>,
  observerName = 'observer',
): Promise<BrokerUnderTest> {
  const service = await startTestService(env);
  const { password } = service.app.broker.serviceCredential;
  return {
    service,
    observer: { username: serviceUsername, password, clientId: `${serviceUsername}/${observerName}` },
    stop: () => service.stop(),
  };
}

export async function startMosquittoUnderTest(
  env: Record<string, string>,
  observerName = 'observer',
): Promise<BrokerUnderTest> {
  const mosquitto = await startMosquitto();
  try {
    const service = await startTestService({
      ...env,
      MQTT_URL: mosquitto.url,
      MQTT_USERNAME: mosquitto.admin.username,
      MQTT_PASSWORD: mosquitto.admin.password,
    });
    return {
      service,
      observer: { ...mosquitto.admin, clientId: `${mosquitto.admin.username}/${observerName}` },
      async stop() {
        await service.stop();
        await mosquitto.stop();
      },
    };
  } catch (error) {
    await mosquitto.stop();
    throw error;
  }
}
