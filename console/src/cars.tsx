/**
 * Cars as every car page shows them: a device id masked but for its last 4 characters (as the
 * SDK's `redactDeviceId` masks it), the full id only copied, never shown; presence in words; a
 * secret shown once; commands sent and followed to their end.
 */
import {
  type Brand,
  brands,
  type components,
  DeviceIdError,
  type Problem,
  redactDeviceId,
  validateDeviceId,
} from '@svc/sdk';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { api, ask, type Outcome } from './api.ts';
import { ActionWords, When } from './parts.tsx';
import { followLink, pages } from './router.ts';

export type CarSummary = components['schemas']['CarSummary'];
export type Command = components['schemas']['Command'];
type CommandState = components['schemas']['CommandState'];
type MqttCredential = components['schemas']['MqttCredential'];

/** The last 4 characters of the id, as `redactDeviceId` leaves them. */
function lastFour(deviceId: string): string {
  return Array.from(redactDeviceId(deviceId)).slice(-4).join('');
}

/** A car in words, for headings, buttons and news: "car ending 4352". */
export function carName(deviceId: string): string {
  return `car ending ${lastFour(deviceId)}`;
}

/** A car in a heading: "Car ending 4352". */
export function carTitle(deviceId: string): string {
  return `Car ending ${lastFour(deviceId)}`;
}

/** The id masked (read by screen readers as its last 4 characters, not as a row of stars) and a button that copies it whole. */
export function MaskedDeviceId({ deviceId }: { deviceId: string }) {
  return (
    <span class="device-id">
      <code aria-hidden="true">{redactDeviceId(deviceId)}</code>
      <span class="visually-hidden">masked device id ending {lastFour(deviceId)}</span>{' '}
      <CopyButton text={deviceId} action="Copy device id" on={`of the ${carName(deviceId)}`} />
    </span>
  );
}

/** Copies `text` to the clipboard and says so; the text itself is never put on the page by it. */
export function CopyButton({ text, action, on }: { text: string; action: string; on: string }) {
  const [outcome, setOutcome] = useState<string>('');
  async function copy() {
    try {
      await navigator.clipboard.writeText(text);
      setOutcome('Copied.');
    } catch {
      setOutcome('This browser did not let the page copy: allow clipboard access, then try again.');
    }
  }
  return (
    <>
      <button type="button" class="secondary copy" onClick={copy}>
        <ActionWords action={action} on={on} />
      </button>
      <span role="status" class="copied">
        {outcome}
      </span>
    </>
  );
}

export function Presence({ online, lastSeen }: { online: boolean; lastSeen: string | null }) {
  return (
    <>
      <span class={`state ${online ? 'presence-online' : 'presence-offline'}`}>
        {online ? 'Online' : 'Offline'}
      </span>
      , last seen <When at={lastSeen} />
    </>
  );
}

/** A link to the car's own page; which car rides in the history entry, not in the address. */
/**
 * What a list shows of a car, as terms of a description list: its masked id, brand, owner (for
 * admins), presence and apps.
 */
export function CarFacts({ car, owner }: { car: CarSummary; owner?: boolean }) {
  return (
    <dl>
      <dt>Device id</dt>
      <dd>
        <MaskedDeviceId deviceId={car.device_id} />
      </dd>
      <dt>Brand</dt>
      <dd>{car.brand}</dd>
      {owner && (
        <>
          <dt>Owner</dt>
          <dd>{car.owner_id ? <code>{car.owner_id}</code> : 'nobody (unpaired)'}</dd>
        </>
      )}
      <dt>Status</dt>
      <dd>
        <Presence online={car.online} lastSeen={car.last_seen} />
      </dd>
      <dt>Mini-apps</dt>
      <dd>
        {car.installed_apps.length === 0
          ? 'none reported'
          : car.installed_apps.map((app) => `${app.app_id} ${app.version}`).join(', ')}
      </dd>
    </dl>
  );
}

export function CarLink({ deviceId }: { deviceId: string }) {
  return (
    <a href={pages.car} onClick={(event) => followLink(event, pages.car, { deviceId })}>
      Open the {carName(deviceId)}
    </a>
  );
}

/**
 * A device id as typed, checked as the service will check it, before any request: a malformed id
 * is refused in words at its field, and never sent.
 */
export function checkTypedDeviceId(typed: string): { deviceId: string } | { refusal: string } {
  const deviceId = typed.trim();
  if (deviceId === '') return { refusal: 'Enter the device id, like brand_a:1HGCM82633A004352.' };
  try {
    validateDeviceId(deviceId);
    return { deviceId };
  } catch (error) {
    if (error instanceof DeviceIdError) {
      const message = error.message.replace(deviceId, 'this');
      return { refusal: `${message.charAt(0).toUpperCase()}${message.slice(1)}.` };
    }
    throw error;
  }
}

/**
 * A broker password, shown this once: the service keeps only its hash. Copy it, or note it, now;
 * a lost one is replaced by rotating the credential.
 */
export function SecretOnce({
  credential,
  title,
  onDone,
}: {
  credential: MqttCredential;
  title: string;
  onDone: () => void;
}) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), []);
  return (
    <section class="secret" aria-labelledby="secret-title">
      <h2 id="secret-title" ref={heading} tabIndex={-1}>
        {title}
      </h2>
      <p class="warning">
        <strong>Shown only this once.</strong> Copy the password now and give it to the car (or connector):
        the service keeps only its hash and cannot show it again. If it is lost, rotate the credential.
      </p>
      <dl>
        <dt>User name and client id</dt>
        <dd>
          {credential.username.startsWith('connector:') ? (
            <code>{credential.username}</code>
          ) : (
            <MaskedDeviceId deviceId={credential.username} />
          )}
        </dd>
        <dt>Password</dt>
        <dd>
          <code class="password">{credential.password}</code>{' '}
          <CopyButton text={credential.password} action="Copy password" on="shown once" />
        </dd>
      </dl>
      <button type="button" onClick={onDone}>
        I have saved the password
      </button>
    </section>
  );
}

const finalStates: CommandState[] = ['completed', 'failed', 'rejected', 'expired'];
export const commandStateNames: Record<CommandState, string> = {
  queued: 'waiting to be sent',
  sent: 'sent, waiting for the car',
  accepted: 'accepted by the car',
  completed: 'done',
  failed: 'failed',
  rejected: 'refused by the car',
  expired: 'expired before the car ran it',
};

/** A command as the console sends it, each name with its own arguments; the service's time to live. */
export type CommandToSend = components['schemas']['CommandRequest'];

export function sendCommand(deviceId: string, command: CommandToSend): Promise<Outcome<Command>> {
  return ask(
    api.POST('/api/v1/cars/{device_id}/commands', {
      params: { path: { device_id: deviceId } },
      body: command,
    }),
  );
}

/**
 * Follows a command until it ends (or the page closes), telling `onChange` each state it moves to.
 * A car that is offline keeps it `sent` until it comes back or the command expires.
 */
export function useFollowedCommand(
  deviceId: string,
  onChange: (command: Command) => void,
): (command: Command) => void {
  const following = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const latest = useRef(onChange);
  latest.current = onChange;
  useEffect(() => () => clearTimeout(following.current), []);
  return function follow(command: Command) {
    clearTimeout(following.current);
    latest.current(command);
    if (finalStates.includes(command.state)) return;
    following.current = setTimeout(async () => {
      const read = await ask(
        api.GET('/api/v1/cars/{device_id}/commands/{command_id}', {
          params: { path: { device_id: deviceId, command_id: command.command_id } },
        }),
      );
      if (read.ok) follow(read.data);
    }, 1000);
  };
}

/** A refusal about a car in the user's words; the service's detail names the full id, which is not shown. */
export function carProblem(problem: Problem, deviceId: string): string {
  return (problem.detail ?? problem.title).split(deviceId).join(`the ${carName(deviceId)}`);
}

/** A brand, chosen from the four the service knows. */
export function BrandField({ value, onChange }: { value: Brand; onChange: (brand: Brand) => void }) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>Brand</label>
      <select
        id={id}
        name="brand"
        value={value}
        onChange={(event) => onChange((event.currentTarget as HTMLSelectElement).value as Brand)}
      >
        {brands.map((brand) => (
          <option key={brand} value={brand}>
            {brand}
          </option>
        ))}
      </select>
    </div>
  );
}
