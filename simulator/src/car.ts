/**
 * One simulated car on the broker: signs in with its credential and a retained `offline` last
 * will, says `online`, reports status and telemetry at its rates and answers its commands.
 */
import { type Brand, toTopicSegments } from '@svc/sdk';
import mqtt, { type MqttClient } from 'mqtt';
import {
  type CarCommand,
  type CarCommandAck,
  type CarPresence,
  type CarStatusReport,
  type CarTelemetry,
  type CarTopicPayloads,
  type CarTopicSuffix,
  carTopic,
  carTopicQos,
  carTopicRetain,
} from '../../generated/mqtt.ts';
import { type CarBody, planCommand } from './commands.ts';
import { Drive } from './drive.ts';
import { describeConnectError, isRefusedCredential, SimulatorError } from './errors.ts';
import type { Route } from './route.ts';

export interface CarCredential {
  /** The full prefixed device id; also the car's MQTT client id and user name. */
  deviceId: string;
  password: string;
}

export interface InstalledApp {
  app_id: string;
  version: string;
}

export interface CarOptions {
  mqttUrl: string;
  /** The certificate authorities (PEM) an `mqtts://` broker must be signed by; default the system's. */
  ca?: Buffer;
  credential: CarCredential;
  statusEveryMs: number;
  telemetryEveryMs: number;
  route: Route;
  /** Where on the route the car starts, in km. */
  startKm: number;
  cruiseKmh: number;
  hostVersion: string;
  installedApps: readonly InstalledApp[];
  /** What the car shows its driver (a pairing code): one line each. */
  show(line: string): void;
  /** What goes wrong after the car started (a lost connection, a malformed command): one line each. */
  warn(line: string): void;
  clock(): Date;
  /** How long the first connection may take before the car gives up. */
  connectTimeoutMs: number;
  /** How long to wait between reconnection attempts after the car lost its connection. */
  reconnectPeriodMs: number;
  /** Called once the broker refused the car's password on a reconnection: the car has stopped. */
  refused(): void;
  /** Told of each message the broker took (QoS 1: acknowledged; QoS 0: written). */
  sent?(suffix: CarTopicSuffix): void;
}

/** Commands a car remembers (with its last ack of each), to answer one delivered twice without running it twice. */
const rememberedCommands = 1000;

export class SimulatedCar {
  readonly deviceId: string;
  readonly brand: Brand;
  readonly nativeId: string;
  private readonly options: CarOptions;
  private readonly body: CarBody;
  private readonly drive: Drive;
  private readonly lastAcks = new Map<string, CarCommandAck>();
  private readonly timers: NodeJS.Timeout[] = [];
  private client: MqttClient | undefined;
  private stopping: Promise<boolean> | undefined;
  /** When the car made its current connection (its will's and its `online`'s `at`). */
  private connectedAt: Date;

  private constructor(options: CarOptions) {
    this.options = options;
    this.connectedAt = options.clock();
    const { brand, nativeId } = toTopicSegments(options.credential.deviceId);
    this.deviceId = options.credential.deviceId;
    this.brand = brand;
    this.nativeId = nativeId;
    this.body = {
      deviceId: this.deviceId,
      installedApps: new Map(options.installedApps.map((app) => [app.app_id, app.version])),
      doorsLocked: false,
      show: options.show,
    };
    this.drive = new Drive({
      route: options.route,
      startKm: options.startKm,
      cruiseKmh: options.cruiseKmh,
      odometerKm: 12_000 + options.startKm * 1000,
      batteryPercent: 80,
      startedAt: options.clock(),
    });
  }

  /** Connects the car and starts its reports; a SimulatorError when the broker will not have it. */
  static async start(options: CarOptions): Promise<SimulatedCar> {
    const car = new SimulatedCar(options);
    await car.connect();
    return car;
  }

  get connected(): boolean {
    return this.client?.connected ?? false;
  }

  get installedApps(): InstalledApp[] {
    return [...this.body.installedApps].map(([app_id, version]) => ({ app_id, version }));
  }

  get doorsLocked(): boolean {
    return this.body.doorsLocked;
  }

  private topic(suffix: CarTopicSuffix): string {
    return carTopic(this.brand, this.nativeId, suffix);
  }

  private presence(state: CarPresence['state'], at = this.options.clock()): CarPresence {
    return { device_id: this.deviceId, brand: this.brand, state, at: at.toISOString() };
  }

  /**
   * The last will, made afresh for each connection: its `at` is when the car registered it, and
   * the connection's `online` says the same time, so that the service orders them (the contract).
   */
  private will() {
    this.connectedAt = this.options.clock();
    return {
      topic: this.topic('presence'),
      payload: Buffer.from(JSON.stringify(this.presence('offline', this.connectedAt))),
      qos: carTopicQos.presence,
      retain: carTopicRetain.presence,
    };
  }

  private async connect(): Promise<void> {
    const { mqttUrl, credential } = this.options;
    try {
      // `false`: the first connection fails at once rather than retrying forever, so that a wrong
      // password or an unreachable broker is reported; later drops are retried (reconnectPeriod).
      this.client = await mqtt.connectAsync(
        mqttUrl,
        {
          clientId: credential.deviceId,
          username: credential.deviceId,
          password: credential.password,
          clean: true,
          protocolVersion: 4,
          ...(this.options.ca ? { ca: this.options.ca } : {}),
          will: this.will(),
          connectTimeout: this.options.connectTimeoutMs,
          reconnectPeriod: this.options.reconnectPeriodMs,
          // A fix that could not be sent is stale by the time the car is back: drop it.
          queueQoSZero: false,
        },
        false,
      );
    } catch (error) {
      throw describeConnectError(error, credential.deviceId, mqttUrl);
    }
    const client = this.client;
    client.on('message', (topic, payload) => {
      if (topic === this.topic('cmd')) void this.receiveCommand(payload);
    });
    client.on('reconnect', () => {
      // mqtt.js builds each CONNECT from its options: the next connection registers a fresh will.
      client.options.will = this.will();
    });
    client.on('connect', () => void this.announce());
    client.on('offline', () => this.options.warn(`car ${this.deviceId} lost its connection; reconnecting`));
    client.on('error', (error) => {
      const problem = describeConnectError(error, this.deviceId, mqttUrl);
      if (!isRefusedCredential(error)) {
        this.options.warn(problem.message);
        return;
      }
      // Rotated or decommissioned while running: retrying the same password only floods the broker.
      this.options.warn(`${problem.message}; this car stops`);
      void this.stop().then(() => this.options.refused());
    });

    const granted = await client
      .subscribeAsync(this.topic('cmd'), { qos: carTopicQos.cmd })
      .catch((error: unknown) => {
        client.end(true);
        throw describeConnectError(error, credential.deviceId, mqttUrl);
      });
    if (granted.some((grant) => grant.qos === 128)) {
      await client.endAsync(true);
      throw new SimulatorError(
        `car ${this.deviceId}: the broker refused its subscription to ${this.topic('cmd')}: check the broker's ACL for cars`,
      );
    }
    await this.announce();
    this.every(this.options.statusEveryMs, () => this.reportStatus());
    this.every(this.options.telemetryEveryMs, () => this.reportTelemetry());
  }

  /** After each (re)connection: online, then the status a new subscriber should see. */
  private async announce(): Promise<void> {
    await this.publish('presence', this.presence('online', this.connectedAt));
    await this.publish('status', this.statusReport());
  }

  /**
   * A timer that starts at a random point of its period, so that a fleet started at once does not
   * publish in bursts.
   */
  private every(periodMs: number, report: () => Promise<void>): void {
    const first = setTimeout(
      () => {
        void report();
        this.timers.push(setInterval(() => void report(), periodMs));
      },
      Math.floor(Math.random() * periodMs),
    );
    this.timers.push(first);
  }

  private async publish<S extends CarTopicSuffix>(suffix: S, payload: CarTopicPayloads[S]): Promise<void> {
    const client = this.client;
    if (!client?.connected) return;
    try {
      await client.publishAsync(this.topic(suffix), JSON.stringify(payload), {
        qos: carTopicQos[suffix],
        retain: carTopicRetain[suffix],
      });
      this.options.sent?.(suffix);
    } catch (error) {
      // A publish cut off by a lost connection: the next report or the reconnection makes up for it.
      if (!this.stopping)
        this.options.warn(`car ${this.deviceId}: ${suffix} not sent: ${(error as Error).message}`);
    }
  }

  statusReport(): CarStatusReport {
    return {
      device_id: this.deviceId,
      brand: this.brand,
      reported_at: this.options.clock().toISOString(),
      host_version: this.options.hostVersion,
      state: { ignition: true, doors_locked: this.body.doorsLocked },
      installed_apps: this.installedApps,
    };
  }

  private async reportStatus(): Promise<void> {
    await this.publish('status', this.statusReport());
  }

  private async reportTelemetry(): Promise<void> {
    const now = this.options.clock();
    const fix = this.drive.advance(now);
    const telemetry: CarTelemetry = {
      device_id: this.deviceId,
      brand: this.brand,
      recorded_at: now.toISOString(),
      location: {
        latitude: fix.latitude,
        longitude: fix.longitude,
        accuracy_m: 5,
        heading_deg: fix.headingDeg,
        speed_kmh: fix.speedKmh,
      },
      odometer_km: fix.odometerKm,
      battery_percent: fix.batteryPercent,
    };
    await this.publish('telemetry', telemetry);
  }

  private ack(
    commandId: string,
    result: { outcome: CarCommandAck['outcome']; detail?: string },
  ): CarCommandAck {
    return {
      command_id: commandId,
      device_id: this.deviceId,
      brand: this.brand,
      outcome: result.outcome,
      ...(result.detail !== undefined ? { detail: result.detail } : {}),
      at: this.options.clock().toISOString(),
    };
  }

  private async receiveCommand(payload: Buffer): Promise<void> {
    const command = this.parseCommand(payload);
    if (!command) return;
    const done = this.lastAcks.get(command.command_id);
    if (done) {
      // Delivered again (QoS 1 redelivery, or the service's outbox resending): say where it stands.
      await this.publish('cmd/ack', done);
      return;
    }
    const plan =
      command.device_id === this.deviceId && command.brand === this.brand
        ? planCommand(this.body, command, this.options.clock())
        : { rejected: 'the command is addressed to another car' };
    if ('rejected' in plan) {
      const rejected = this.ack(command.command_id, { outcome: 'rejected', detail: plan.rejected });
      this.remember(command.command_id, rejected);
      await this.publish('cmd/ack', rejected);
      return;
    }
    const accepted = this.ack(command.command_id, { outcome: 'accepted' });
    // Remembered before the first await: a copy arriving meanwhile must not run the command again.
    this.remember(command.command_id, accepted);
    await this.publish('cmd/ack', accepted);
    const effect = plan.run();
    const completed = this.ack(command.command_id, { outcome: 'completed' });
    this.remember(command.command_id, completed);
    // The new status goes out before `completed`, so that whoever sees the command completed
    // finds its effect in the car's last report.
    if (effect.statusChanged) await this.reportStatus();
    await this.publish('cmd/ack', completed);
  }

  private remember(commandId: string, ack: CarCommandAck): void {
    this.lastAcks.set(commandId, ack);
    if (this.lastAcks.size > rememberedCommands) {
      const oldest = this.lastAcks.keys().next().value;
      if (oldest !== undefined) this.lastAcks.delete(oldest);
    }
  }

  /** The command, or undefined (and a warning) when the payload is not one. */
  private parseCommand(payload: Buffer): CarCommand | undefined {
    let command: Partial<CarCommand>;
    try {
      command = JSON.parse(payload.toString('utf8'));
    } catch {
      this.options.warn(`car ${this.deviceId}: ignored a command that is not JSON`);
      return undefined;
    }
    const isObject = (value: unknown) => typeof value === 'object' && value !== null && !Array.isArray(value);
    if (!isObject(command) || typeof command.command_id !== 'string' || typeof command.name !== 'string') {
      this.options.warn(`car ${this.deviceId}: ignored a command without command_id or name`);
      return undefined;
    }
    return { ...command, args: isObject(command.args) ? command.args : {} } as CarCommand;
  }

  /**
   * Says `offline` (a clean disconnect sends no last will) and disconnects; safe to call twice.
   * Whether the car was online: not when it had stopped already, or was between connections.
   */
  stop(): Promise<boolean> {
    this.stopping ??= this.disconnect();
    return this.stopping;
  }

  private async disconnect(): Promise<boolean> {
    for (const timer of this.timers) clearTimeout(timer);
    const client = this.client;
    if (!client) return false;
    const online = client.connected;
    if (online) {
      try {
        await client.publishAsync(this.topic('presence'), JSON.stringify(this.presence('offline')), {
          qos: carTopicQos.presence,
          retain: carTopicRetain.presence,
        });
      } catch {
        // Lost the connection meanwhile: the broker publishes the will instead.
      }
    }
    await client.endAsync(!client.connected);
    return online;
  }
}
