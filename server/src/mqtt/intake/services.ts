/** What the intake handlers call: the services of cars/ and commands/, as the intake sees them. */
import type { CarCommandAck } from '../../../../generated/mqtt.ts';
import type { CarReportService } from '../../cars/car-report-service.ts';
import type { TelemetryBatch } from '../../cars/telemetry-batch.ts';
import type { Clock } from '../../clock.ts';

/** What the intake tells the commands (command-lifecycle.ts, command-outbox.ts). */
export interface CommandIntake {
  /** A car's valid acknowledgement of one of its commands, the car being provisioned (the intake asked already). */
  acknowledge(
    deviceId: string,
    ack: CarCommandAck,
  ): Promise<'stored' | 'ignored' | 'unknown_command' | 'command_of_another_car'>;
  /** A car said `online`: it gets again what it has not finished. Must not wait for the broker. */
  carOnline(deviceId: string): void;
}

export interface IntakeServices {
  /** Writes on the bridge's own connection (`writer` in bridge.ts). */
  carReports: Pick<CarReportService, 'saveStatus' | 'savePresence' | 'sighted'>;
  /** Written in batches, in the background. */
  telemetry: Pick<TelemetryBatch, 'add'>;
  commands: CommandIntake;
  clock: Clock;
}
