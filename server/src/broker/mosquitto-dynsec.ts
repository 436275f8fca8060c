/**
 * Service mode: a Mosquitto 2 at MQTT_URL with the dynamic-security plugin. The service starts no
 * broker; it signs in as MQTT_USERNAME and keeps one dynsec client and one role per car and per
 * connector through the control API (`$CONTROL/dynamic-security/v1`), the role's ACLs being the
 * car's or the connector's row of the table in acl.ts, everything else denied by default.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { isValidDeviceId } from '@svc/sdk';
import { connectAsync, type MqttClient } from 'mqtt';
import { carTopic, carTopicFilter, serviceReceives, serviceSends } from '../../../generated/mqtt.ts';
import { UnavailableError } from '../errors.ts';
import type { Logger } from '../logger.ts';
import { BrokerSetupError, type ServiceBroker } from './broker.ts';
import type { BrokerAccount, BrokerAccounts, ListedBrokerAccount } from './broker-accounts.ts';
import { hashBrokerSecret } from './credentials.ts';

const controlTopic = '$CONTROL/dynamic-security/v1';
const responseTopic = `${controlTopic}/response`;
/** How long a control command may go unanswered before provisioning answers 503. */
const answerMs = 10_000;

export interface DynsecAcl {
  acltype: 'publishClientSend' | 'subscribeLiteral' | 'subscribePattern';
  topic: string;
  allow: boolean;
}

/**
 * The account's row of the ACL table, as dynsec ACLs. A car's own `cmd` is a literal subscription;
 * a connector's `subscribePattern` on `cars/<brand>/+/cmd` grants that filter and each of its cars'
 * `cmd`, and nothing wider (Mosquitto refuses `cars/<brand>/#` under it).
 */
export function dynsecAcls(account: BrokerAccount): DynsecAcl[] {
  const nativeId = account.role === 'car' ? account.nativeId : undefined;
  if (account.role === 'car' && nativeId === undefined) {
    throw new Error(`the car account ${account.username} has no native id`);
  }
  const publishes = serviceReceives.map((suffix) => ({
    acltype: 'publishClientSend' as const,
    topic:
      nativeId === undefined
        ? carTopicFilter(suffix, account.brand)
        : carTopic(account.brand, nativeId, suffix),
    allow: true,
  }));
  const subscribes = serviceSends.map((suffix) =>
    nativeId === undefined
      ? { acltype: 'subscribePattern' as const, topic: carTopicFilter(suffix, account.brand), allow: true }
      : {
          acltype: 'subscribeLiteral' as const,
          topic: carTopic(account.brand, nativeId, suffix),
          allow: true,
        },
  );
  return [...publishes, ...subscribes];
}

/**
 * The service's row, for the role the operator gives MQTT_USERNAME (docs/operating.md, "The broker"): send
 * `cmd` to every car, subscribe to the topics cars send, plain or as the shared subscription
 * `$share/svc/…` of several replicas (Mosquitto checks the filter as the client wrote it).
 */
export const serviceRoleAcls: DynsecAcl[] = [
  ...serviceSends.map((suffix) => ({
    acltype: 'publishClientSend' as const,
    topic: carTopicFilter(suffix),
    allow: true,
  })),
  ...serviceReceives.flatMap((suffix) => [
    { acltype: 'subscribeLiteral' as const, topic: carTopicFilter(suffix), allow: true },
    { acltype: 'subscribeLiteral' as const, topic: `$share/svc/${carTopicFilter(suffix)}`, allow: true },
  ]),
];

interface DynsecResponse {
  command: string;
  error?: string;
  correlationData?: string;
  data?: { clients?: { username: string; textdescription?: string }[] };
}

/**
 * A client's `textdescription` records the hash of the password the service gave it (Mosquitto
 * never returns its own), so a sync tells a client whose password differs from SQL's.
 */
const descriptionPrefix = 'svc credential sha256:';

/** A car's or connector's user name: the clients this service owns (never the operator's own). */
function isAccountName(username: string): boolean {
  return username.startsWith('connector:') || isValidDeviceId(username);
}

/** Why mqtt.js could not sign in, said once (its messages may repeat the broker's reason). */
function signInFailure(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const parts = message.split(': ');
  return parts.filter((part, index) => parts.indexOf(part) === index).join(': ');
}

function brokerUnavailable(): UnavailableError {
  return new UnavailableError(
    'broker_unavailable',
    'The MQTT broker does not answer just now: try again in a few seconds.',
  );
}

export function createMosquittoBroker(deps: {
  url: string;
  username: string;
  password: string;
  /** The certificate authorities the broker's certificate must chain to (`mqtts://`, MQTT_CA). */
  ca?: Buffer;
  logger: Logger;
}): ServiceBroker {
  const { logger } = deps;
  let client: MqttClient | undefined;
  const pending = new Map<string, (responses: DynsecResponse[]) => void>();

  /**
   * Sends `commands` in one control message and resolves with their responses, in order. Other
   * replicas' responses arrive on the same topic; the correlation data tells ours apart.
   */
  async function control(commands: Record<string, unknown>[]): Promise<DynsecResponse[]> {
    // Offline (the broker restarting), mqtt.js would queue the command and send it on reconnecting,
    // long after the caller was told 503: a provisioning undone meanwhile would be done again.
    if (!client?.connected) throw brokerUnavailable();
    const id = randomUUID();
    const tagged = commands.map((command, index) => ({ ...command, correlationData: `${id}/${index}` }));
    let timer: NodeJS.Timeout | undefined;
    const answered = new Promise<DynsecResponse[]>((resolve, reject) => {
      pending.set(id, resolve);
      timer = setTimeout(() => reject(brokerUnavailable()), answerMs);
    });
    try {
      await client.publishAsync(controlTopic, JSON.stringify({ commands: tagged }), { qos: 1 });
      return await answered;
    } finally {
      clearTimeout(timer);
      pending.delete(id);
    }
  }

  function onResponse(_topic: string, payload: Buffer): void {
    let responses: DynsecResponse[];
    try {
      responses = (JSON.parse(payload.toString('utf8')) as { responses?: DynsecResponse[] }).responses ?? [];
    } catch {
      return;
    }
    const id = responses[0]?.correlationData?.split('/')[0];
    if (id) pending.get(id)?.(responses);
  }

  /** Throws for a response that is an error other than the ones `expected` (which are fine). */
  function check(response: DynsecResponse | undefined, ...expected: string[]): void {
    if (!response) throw brokerUnavailable();
    if (response.error === undefined || expected.includes(response.error)) return;
    // An account without the rights, or a plugin that refuses: the operator's to fix.
    logger.error('the broker refused a dynamic-security command', {
      command: response.command,
      reason: response.error,
    });
    throw brokerUnavailable();
  }

  const accounts: BrokerAccounts = {
    async put(account, password) {
      const [role, made] = await control([
        { command: 'createRole', rolename: account.username, acls: dynsecAcls(account) },
        {
          command: 'createClient',
          username: account.username,
          password,
          textdescription: `${descriptionPrefix}${hashBrokerSecret(password)}`,
          // Pinned, so that no one takes a car's client id (that would disconnect the car).
          clientid: account.username,
          roles: [{ rolename: account.username }],
        },
      ]);
      check(role, 'Role already exists');
      check(made, 'Client already exists');
      if (made?.error === 'Client already exists') {
        // Rotation. Mosquitto 2.0 disconnects a client signed in as this user when it sets the password.
        const [set, described] = await control([
          { command: 'setClientPassword', username: account.username, password },
          {
            command: 'modifyClient',
            username: account.username,
            textdescription: `${descriptionPrefix}${hashBrokerSecret(password)}`,
          },
        ]);
        check(set);
        check(described);
      }
    },
    async remove(username) {
      // Deleting the client disconnects whoever is signed in as it.
      const [client, role] = await control([
        { command: 'deleteClient', username },
        { command: 'deleteRole', rolename: username },
      ]);
      check(client, 'Client not found');
      check(role, 'Role not found');
    },
    async list() {
      const [listed] = await control([{ command: 'listClients', verbose: true }]);
      check(listed);
      return (listed?.data?.clients ?? []).flatMap((client): ListedBrokerAccount[] => {
        if (client.username === deps.username || !isAccountName(client.username)) return [];
        const described = client.textdescription?.startsWith(descriptionPrefix)
          ? client.textdescription.slice(descriptionPrefix.length)
          : undefined;
        return [{ username: client.username, ...(described ? { secretSha256: described } : {}) }];
      });
    },
  };

  return {
    accounts,
    serviceCredential: { username: deps.username, password: deps.password },
    async start() {
      try {
        client = await connectAsync(
          deps.url,
          {
            username: deps.username,
            password: deps.password,
            clientId: `${deps.username}/accounts-${randomBytes(4).toString('hex')}`,
            protocolVersion: 4,
            connectTimeout: answerMs,
            ...(deps.ca ? { ca: deps.ca } : {}),
          },
          // Start-up fails on the first refusal; once running, the client reconnects by itself.
          false,
        );
      } catch (error) {
        throw new BrokerSetupError(
          `cannot sign in to the broker at MQTT_URL ${deps.url} as MQTT_USERNAME ${deps.username}: ${signInFailure(error)}`,
          { cause: error },
        );
      }
      client.on('message', onResponse);
      client.on('error', (error) => logger.warn('broker connection failed', { reason: error.message }));
      // One harmless command: the account may use the control API, or start-up says so.
      try {
        await client.subscribeAsync(responseTopic, { qos: 1 });
        check((await control([{ command: 'getDefaultACLAccess' }]))[0]);
      } catch {
        // Mosquitto answers nothing both when the plugin is not loaded and when the account may
        // not publish there, so the line names both.
        await client.endAsync().catch(() => undefined);
        client = undefined;
        throw new BrokerSetupError(
          `the broker at MQTT_URL ${deps.url} gave MQTT_USERNAME ${deps.username} no answer on ${controlTopic}: load the dynamic-security plugin in mosquitto.conf and give that account its admin role (docs/operating.md, "The broker")`,
        );
      }
      return deps.url;
    },
    async stop() {
      const stopping = client;
      client = undefined;
      await stopping?.endAsync();
    },
  };
}
