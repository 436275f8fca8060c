/**
 * What a simulated car does with each command of DESIGN §9, as a table from command name to
 * handler. A handler changes the car and says how it ended; the car sends the acknowledgements.
 */
import type { CarCommand } from '../../generated/mqtt.ts';

/** The parts of a car that commands change. */
export interface CarBody {
  readonly deviceId: string;
  /** Installed mini-apps: app id → version. */
  readonly installedApps: Map<string, string>;
  doorsLocked: boolean;
  /** Shows a line on the car's screen (the simulator prints it). */
  show(line: string): void;
}

/**
 * A command the car will run, or why it will not. A car checks first and says `accepted` only for a
 * command it is about to run: an unknown name, bad arguments or an expired command is `rejected`.
 */
export type CommandPlan = { run(): CommandEffect } | { rejected: string };

export interface CommandEffect {
  /** Whether the car's status report changed, so the car reports again at once. */
  statusChanged: boolean;
}

/** A command's arguments as they came: the car checks each one it uses. */
type Args = Readonly<Record<string, unknown>>;
type CommandHandler = (car: CarBody, args: Args) => CommandPlan;

function textArg(args: Args, name: string): string | undefined {
  const value = args[name];
  return typeof value === 'string' && value.trim() !== '' ? value : undefined;
}

const commandHandlers: Readonly<Record<string, CommandHandler>> = {
  'app.install'(car, args) {
    const appId = textArg(args, 'app_id');
    const version = textArg(args, 'version');
    if (!appId || !version) return { rejected: 'app.install needs args.app_id and args.version' };
    return {
      run() {
        const before = car.installedApps.get(appId);
        car.installedApps.set(appId, version);
        car.show(`car ${car.deviceId} installs ${appId} ${version}${before ? ` (was ${before})` : ''}`);
        return { statusChanged: before !== version };
      },
    };
  },
  'app.uninstall'(car, args) {
    const appId = textArg(args, 'app_id');
    if (!appId) return { rejected: 'app.uninstall needs args.app_id' };
    if (!car.installedApps.has(appId)) return { rejected: `${appId} is not installed` };
    return { run: () => ({ statusChanged: car.installedApps.delete(appId) }) };
  },
  'doors.lock'(car) {
    return { run: () => ({ statusChanged: setDoorsLocked(car, true) }) };
  },
  'doors.unlock'(car) {
    return { run: () => ({ statusChanged: setDoorsLocked(car, false) }) };
  },
  'pairing.show_code'(car, args) {
    const code = textArg(args, 'code');
    if (!code || !/^\d{8}$/.test(code)) return { rejected: 'pairing.show_code needs args.code, 8 digits' };
    return {
      run() {
        car.show(`car ${car.deviceId} shows pairing code ${code}`);
        return { statusChanged: false };
      },
    };
  },
};

/** Whether the doors changed. */
function setDoorsLocked(car: CarBody, locked: boolean): boolean {
  const changed = car.doorsLocked !== locked;
  car.doorsLocked = locked;
  return changed;
}

export const knownCommands: readonly string[] = Object.keys(commandHandlers);

/** What the car will do with one command that arrived at `now`. */
export function planCommand(car: CarBody, command: CarCommand, now: Date): CommandPlan {
  if (command.expires_at !== undefined && Date.parse(command.expires_at) <= now.getTime()) {
    return { rejected: 'expired' };
  }
  const handler = Object.hasOwn(commandHandlers, command.name) ? commandHandlers[command.name] : undefined;
  if (!handler) return { rejected: `unknown command ${command.name}` };
  return handler(car, command.args as Args);
}
