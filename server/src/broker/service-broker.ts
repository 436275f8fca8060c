/**
 * The broker the service runs with: Mosquitto when MQTT_URL names one the service manages (its
 * dynamic security), otherwise aedes in this process; and where broker credentials are kept for
 * it (Redis when REDIS_URL is set, otherwise a table of the store).
 */
import type { Registry } from 'prom-client';
import type { Config } from '../config.ts';
import { ListenError } from '../listen-error.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../store/db.ts';
import type { ServiceBroker } from './broker.ts';
import { createBrokerMetrics } from './broker-metrics.ts';
import { type CredentialStore, createRedisCredentialStore, createSqlCredentialStore } from './credentials.ts';
import { createEmbeddedBroker } from './embedded-broker.ts';
import { createMosquittoBroker } from './mosquitto-dynsec.ts';

export function createCredentialStore(
  config: Pick<Config, 'redisUrl'>,
  db: Db,
  logger: Logger,
): CredentialStore {
  return config.redisUrl ? createRedisCredentialStore(config.redisUrl, logger) : createSqlCredentialStore(db);
}

export function createServiceBroker(
  config: Config,
  deps: { credentials: CredentialStore; logger: Logger; registry: Registry },
): ServiceBroker {
  const { credentials, logger } = deps;
  return config.mqttUrl
    ? createMosquittoBroker({
        url: config.mqttUrl,
        username: config.mqttUsername ?? '',
        password: config.mqttPassword ?? '',
        ca: config.mqttCa,
        logger,
      })
    : createEmbeddedBroker({
        credentials,
        host: config.host,
        port: config.mqttPort,
        logger,
        metrics: createBrokerMetrics(deps.registry),
        queueBound: { messages: config.mqttMaxQueuedMessages, bytes: config.mqttMaxQueuedBytes },
        tls: config.mqttTls,
      });
}

/**
 * Starts the broker (or the service's connection to Mosquitto); where cars connect. An embedded
 * listener that cannot start is a `ListenError` naming its settings (MQTT, MQTT_TLS).
 */
export async function startServiceBroker(
  broker: ServiceBroker,
  config: Pick<Config, 'mqttUrl'>,
): Promise<string> {
  try {
    return await broker.start();
  } catch (error) {
    if (config.mqttUrl) throw error;
    const tls = (error as { listener?: string } | undefined)?.listener === 'MQTT_TLS';
    throw new ListenError(tls ? 'MQTT_TLS' : 'MQTT', error);
  }
}
