/**
 * One car, for its owner (or an admin): its status and doors, where it last was (coordinates, and
 * a map link the user may choose to open: no map is loaded here), its mini-apps, and its
 * ownership. Commands (lock, unlock, install, remove) are followed until the car has run them.
 */
import { type components, isUuid, type Problem } from '@svc/sdk';
import { useState } from 'preact/hooks';
import { api, ask } from '../api.ts';
import {
  type Command,
  type CommandToSend,
  carName,
  carProblem,
  commandStateNames,
  MaskedDeviceId,
  Presence,
  sendCommand,
  useFollowedCommand,
} from '../cars.tsx';
import { Confirm } from '../confirm.tsx';
import { ActionWords, Alert, Field, Link, Notice, PageHeading, useSubmit, When } from '../parts.tsx';
import { useRefreshing } from '../refresh.ts';
import { pages } from '../router.ts';

type CarStatus = components['schemas']['CarStatus'];
type Install = components['schemas']['Install'];
type Location = components['schemas']['Location'];

export function CarPage({ deviceId }: { deviceId: string | undefined }) {
  if (!deviceId) {
    return (
      <main>
        <PageHeading title="Car">Car</PageHeading>
        <p>
          Which car to show is not known here (a page opened in a new tab does not say it).{' '}
          <Link to={pages.cars}>Open a car from My cars</Link>.
        </p>
      </main>
    );
  }
  return <CarDetails key={deviceId} deviceId={deviceId} />;
}

/** What a command is for, in words: "Lock doors". */
function commandWords(command: Pick<Command, 'name' | 'args'>): string {
  const app = typeof command.args.app_id === 'string' ? command.args.app_id : '';
  if (command.name === 'doors.lock') return 'Lock doors';
  if (command.name === 'doors.unlock') return 'Unlock doors';
  if (command.name === 'app.install') return `Install ${app} ${String(command.args.version ?? '')}`.trim();
  if (command.name === 'app.uninstall') return `Remove ${app}`;
  return command.name;
}

function CarDetails({ deviceId }: { deviceId: string }) {
  const name = carName(deviceId);
  const [status, setStatus] = useState<CarStatus>();
  const [install, setInstall] = useState<Install>();
  const [location, setLocation] = useState<Location | null>();
  const [problem, setProblem] = useState<string>();
  const [news, setNews] = useState<string>();
  const [command, setCommand] = useState<Command>();
  /** Set once the car is no longer the user's (unpaired, transferred): nothing more is asked of it. */
  const [gone, setGone] = useState<string>();
  const path = { params: { path: { device_id: deviceId } } };

  async function load() {
    if (gone) return;
    const [readStatus, readInstall, readLocation] = await Promise.all([
      ask(api.GET('/api/v1/cars/{device_id}/status', path)),
      ask(api.GET('/api/v1/cars/{device_id}/install', path)),
      ask(api.GET('/api/v1/cars/{device_id}/location', path)),
    ]);
    if (!readStatus.ok) return setProblem(carProblem(readStatus.problem, deviceId));
    setStatus(readStatus.data);
    if (readInstall.ok) setInstall(readInstall.data);
    if (readLocation.ok) setLocation(readLocation.data);
    else if (readLocation.problem.code === 'no_location_yet') setLocation(null);
  }
  // The car reports while the page is open: its presence, doors and apps follow.
  useRefreshing(load);

  const follow = useFollowedCommand(deviceId, (moved) => {
    setCommand(moved);
    if (moved.state === 'completed') void load();
  });
  async function send(request: CommandToSend) {
    setNews(undefined);
    setProblem(undefined);
    const sent = await sendCommand(deviceId, request);
    if (!sent.ok) return setProblem(carProblem(sent.problem, deviceId));
    follow(sent.data);
  }

  if (gone) {
    return (
      <main>
        <PageHeading title={name}>The {name}</PageHeading>
        <Notice>{gone}</Notice>
        <p>
          <Link to={pages.cars}>Back to My cars</Link>
        </p>
      </main>
    );
  }

  const doorsLocked = status?.state.doors_locked;
  return (
    <main>
      <PageHeading title={name}>The {name}</PageHeading>
      {news && <Notice>{news}</Notice>}
      {problem && <Alert>{problem}</Alert>}
      {command && (
        <Notice>
          {commandWords(command)}: {commandStateNames[command.state]}
          {command.detail ? ` (${command.detail})` : ''}.
        </Notice>
      )}
      {status && (
        <section aria-labelledby="status-title">
          <h2 id="status-title">Status</h2>
          <dl>
            <dt>Device id</dt>
            <dd>
              <MaskedDeviceId deviceId={deviceId} />
            </dd>
            <dt>Brand</dt>
            <dd>{status.brand}</dd>
            <dt>Connection</dt>
            <dd>
              <Presence online={status.online} lastSeen={status.last_seen} />
            </dd>
            <dt>Doors</dt>
            <dd>{doorsLocked === true ? 'Locked' : doorsLocked === false ? 'Unlocked' : 'not reported'}</dd>
            <dt>Last report</dt>
            <dd>
              <When at={status.reported_at} />
            </dd>
          </dl>
          <div class="actions">
            <button type="button" onClick={() => send({ name: 'doors.lock' })}>
              Lock doors
            </button>
            <button type="button" class="secondary" onClick={() => send({ name: 'doors.unlock' })}>
              Unlock doors
            </button>
          </div>
        </section>
      )}
      {location !== undefined && <CarLocation location={location} />}
      {install && <MiniApps install={install} onSend={send} />}
      {status && (
        <Ownership
          deviceId={deviceId}
          onGone={setGone}
          onProblem={(refused) => setProblem(carProblem(refused, deviceId))}
        />
      )}
    </main>
  );
}

function CarLocation({ location }: { location: Location | null }) {
  return (
    <section aria-labelledby="location-title">
      <h2 id="location-title">Location</h2>
      {location === null ? (
        <p>The car has sent no location yet.</p>
      ) : (
        <>
          <dl>
            <dt>Coordinates</dt>
            <dd>
              <code>
                {location.latitude.toFixed(5)}, {location.longitude.toFixed(5)}
              </code>
            </dd>
            <dt>Recorded</dt>
            <dd>
              <When at={location.recorded_at} />
            </dd>
          </dl>
          {/* Only a link: the page loads no map, and the place goes to another site only if the user follows it. */}
          <a
            href={`https://www.openstreetmap.org/?mlat=${location.latitude}&mlon=${location.longitude}#map=16/${location.latitude}/${location.longitude}`}
            rel="noopener noreferrer"
            target="_blank"
          >
            Show on OpenStreetMap (another site, in a new tab)
          </a>
        </>
      )}
    </section>
  );
}

function MiniApps({
  install,
  onSend,
}: {
  install: Install;
  onSend: (request: CommandToSend) => Promise<void>;
}) {
  const [appId, setAppId] = useState('');
  const [version, setVersion] = useState('');
  const installApp = useSubmit(async () => {
    // Without a version the service installs the one this car should run (its rollout's, else the live one).
    const args = version.trim()
      ? { app_id: appId.trim(), version: version.trim() }
      : { app_id: appId.trim() };
    await onSend({ name: 'app.install', args });
  });
  return (
    <section aria-labelledby="apps-title">
      <h2 id="apps-title">Mini-apps</h2>
      {install.installed_apps.length === 0 ? (
        <p>The car has reported no mini-apps.</p>
      ) : (
        <ul class="cards" aria-label="Mini-apps on the car">
          {install.installed_apps.map((app) => (
            <li key={app.app_id} class="card">
              <code>{app.app_id}</code> {app.version}
              <br />
              <button
                type="button"
                class="secondary"
                onClick={() => onSend({ name: 'app.uninstall', args: { app_id: app.app_id } })}
              >
                <ActionWords action="Remove" on={app.app_id} />
              </button>
            </li>
          ))}
        </ul>
      )}
      <h3>Install a mini-app</h3>
      <form onSubmit={installApp.onSubmit} noValidate>
        <Field label="App id" name="app_id" value={appId} onInput={setAppId} required />
        <Field
          label="Version (optional)"
          name="version"
          hint="Empty: the version this car should run, as its rollout or the live version says."
          value={version}
          onInput={setVersion}
        />
        <button type="submit" aria-disabled={installApp.busy}>
          Install
        </button>
      </form>
    </section>
  );
}

/** Unpair or hand the car to another account: each asks first. */
function Ownership({
  deviceId,
  onGone,
  onProblem,
}: {
  deviceId: string;
  onGone: (message: string) => void;
  onProblem: (problem: Problem) => void;
}) {
  const name = carName(deviceId);
  const [asking, setAsking] = useState<'unpair' | 'transfer'>();
  const [toUser, setToUser] = useState('');
  const [toUserError, setToUserError] = useState<string>();
  const path = { params: { path: { device_id: deviceId } } };

  async function unpair() {
    setAsking(undefined);
    const done = await ask(api.POST('/api/v1/cars/{device_id}/unpair', { ...path, body: {} }));
    if (!done.ok) return onProblem(done.problem);
    onGone(`Unpaired the ${name}: it is no longer paired with any account.`);
  }
  async function transfer() {
    setAsking(undefined);
    const done = await ask(
      api.POST('/api/v1/cars/{device_id}/transfer', { ...path, body: { to_user: toUser.trim() } }),
    );
    if (!done.ok) {
      if (done.problem.code === 'unknown_account') return setToUserError('No account has this id.');
      return onProblem(done.problem);
    }
    onGone(`Transferred the ${name} to the account ${toUser.trim()}.`);
  }
  const askTransfer = useSubmit(async () => {
    if (!isUuid(toUser.trim()))
      return setToUserError(
        "Paste the new owner's account id (they find it under My cars), like 9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b.",
      );
    setToUserError(undefined);
    setAsking('transfer');
  });

  return (
    <section aria-labelledby="ownership-title">
      <h2 id="ownership-title">Ownership</h2>
      <button type="button" class="secondary" onClick={() => setAsking('unpair')}>
        Unpair this car
      </button>
      <h3>Transfer to another account</h3>
      <form onSubmit={askTransfer.onSubmit} noValidate>
        <Field
          label="New owner's account id"
          name="to_user"
          value={toUser}
          onInput={setToUser}
          error={toUserError}
          required
        />
        <button type="submit" class="secondary">
          Transfer
        </button>
      </form>
      {asking === 'unpair' && (
        <Confirm
          title={`Unpair the ${name}?`}
          action="Unpair"
          keep="Keep it"
          onConfirm={unpair}
          onCancel={() => setAsking(undefined)}
        >
          <p>
            Nobody will own it: you will no longer see it or send it commands, and its commands not yet run
            end. Pairing again needs the code the car shows.
          </p>
        </Confirm>
      )}
      {asking === 'transfer' && (
        <Confirm
          title={`Transfer the ${name}?`}
          action="Transfer"
          keep="Keep it"
          onConfirm={transfer}
          onCancel={() => setAsking(undefined)}
        >
          <p>
            The account <code>{toUser.trim()}</code> will own it, and you will no longer see it. Only its new
            owner can give it back.
          </p>
        </Confirm>
      )}
    </section>
  );
}
