/**
 * Fleet (admins): provision a car (its broker password shown once), find one by device id, every
 * car a page at a time, and for each: a new password (rotate) or decommission, each asked first.
 */
import type { Brand, components, Problem } from '@svc/sdk';
import { useEffect, useState } from 'preact/hooks';
import { api, ask } from '../api.ts';
import {
  BrandField,
  CarFacts,
  CarLink,
  type CarSummary,
  carName,
  carProblem,
  carTitle,
  checkTypedDeviceId,
  SecretOnce,
} from '../cars.tsx';
import { Confirm } from '../confirm.tsx';
import { ActionWords, Alert, Field, Notice, PageHeading, useFocusOnRefusal, useSubmit } from '../parts.tsx';

type MqttCredential = components['schemas']['MqttCredential'];

export function Fleet() {
  const [cars, setCars] = useState<CarSummary[]>();
  const [nextCursor, setNextCursor] = useState<string | null>(null);
  const [problem, setProblem] = useState<string>();
  const [news, setNews] = useState<string>();
  /** A password just made, with what it is for: shown until the admin says it is saved. */
  const [secret, setSecret] = useState<{ credential: MqttCredential; title: string }>();

  async function load(cursor?: string) {
    const listed = await ask(api.GET('/api/v1/admin/cars', { params: { query: cursor ? { cursor } : {} } }));
    if (!listed.ok) return setProblem(listed.problem.detail);
    setCars((shown) => (cursor ? [...(shown ?? []), ...listed.data.cars] : listed.data.cars));
    setNextCursor(listed.data.next_cursor);
  }
  useEffect(() => {
    void load();
  }, []);

  function shown(credential: MqttCredential, title: string) {
    setNews(undefined);
    setProblem(undefined);
    setSecret({ credential, title });
    void load();
  }
  async function changed(message: string) {
    setNews(message);
    setProblem(undefined);
    await load();
  }

  return (
    <main>
      <PageHeading title="Fleet">Fleet</PageHeading>
      {secret && (
        <SecretOnce
          credential={secret.credential}
          title={secret.title}
          onDone={() => {
            setSecret(undefined);
            setNews('The password is no longer shown, here or anywhere.');
          }}
        />
      )}
      {news && <Notice>{news}</Notice>}
      {problem && <Alert>{problem}</Alert>}
      <ProvisionCar
        onProvisioned={(provisioned) =>
          shown(provisioned.mqtt, `The ${carName(provisioned.car.device_id)} is provisioned: its password`)
        }
      />
      <FindCar onRotated={shown} onChanged={changed} onProblem={setProblem} />
      <h2 id="all-cars">Every car, newest first</h2>
      {cars?.length === 0 && <p>No car is provisioned yet.</p>}
      {cars && cars.length > 0 && (
        <ul class="cards" aria-labelledby="all-cars">
          {cars.map((car) => (
            <FleetCar
              key={car.device_id}
              car={car}
              onRotated={shown}
              onChanged={changed}
              onProblem={setProblem}
            />
          ))}
        </ul>
      )}
      {nextCursor && (
        <button type="button" class="secondary" onClick={() => load(nextCursor)}>
          Show more cars
        </button>
      )}
    </main>
  );
}

function ProvisionCar({
  onProvisioned,
}: {
  onProvisioned: (provisioned: components['schemas']['ProvisionedCar']) => void;
}) {
  const [brand, setBrand] = useState<Brand>('brand_a');
  const [typedId, setTypedId] = useState('');
  const [refusal, setRefusal] = useState<string>();
  const form = useFocusOnRefusal(refusal);
  const provision = useSubmit(async () => {
    // The brand chosen is the id's prefix, unless the id has one of its own already.
    const typed = typedId.trim();
    const checked = checkTypedDeviceId(typed.includes(':') ? typed : `${brand}:${typed}`);
    if ('refusal' in checked) return setRefusal(checked.refusal);
    const made = await ask(api.POST('/api/v1/admin/cars', { body: { device_id: checked.deviceId, brand } }));
    if (!made.ok) return setRefusal(carProblem(made.problem, checked.deviceId));
    setRefusal(undefined);
    setTypedId('');
    onProvisioned(made.data);
  });
  return (
    <section aria-labelledby="provision-title">
      <h2 id="provision-title">Provision a car</h2>
      <form ref={form} onSubmit={provision.onSubmit} noValidate>
        <BrandField value={brand} onChange={setBrand} />
        <Field
          label="Device id"
          name="device_id"
          hint="The native id (a VIN for brand_a), or the full id with its brand first."
          value={typedId}
          onInput={setTypedId}
          error={refusal}
          autoComplete="off"
          required
        />
        <button type="submit" aria-disabled={provision.busy}>
          Provision
        </button>
      </form>
    </section>
  );
}

interface CarActions {
  onRotated: (credential: MqttCredential, title: string) => void;
  onChanged: (message: string) => Promise<void>;
  onProblem: (message: string) => void;
}

function FindCar(actions: CarActions) {
  const [typedId, setTypedId] = useState('');
  const [refusal, setRefusal] = useState<string>();
  const [found, setFound] = useState<CarSummary | null>();
  const form = useFocusOnRefusal(refusal);
  const find = useSubmit(async () => {
    const checked = checkTypedDeviceId(typedId);
    if ('refusal' in checked) return setRefusal(checked.refusal);
    const listed = await ask(
      api.GET('/api/v1/admin/cars', { params: { query: { device_id: checked.deviceId } } }),
    );
    if (!listed.ok) return setRefusal(carProblem(listed.problem, checked.deviceId));
    setRefusal(undefined);
    setFound(listed.data.cars[0] ?? null);
  });
  return (
    <section aria-labelledby="find-title">
      <h2 id="find-title">Find a car</h2>
      <form ref={form} onSubmit={find.onSubmit} noValidate>
        <Field
          label="Device id to find"
          name="device_id"
          hint="The full id, its brand first: brand_a:1HGCM82633A004352."
          value={typedId}
          onInput={setTypedId}
          error={refusal}
          autoComplete="off"
          required
        />
        <button type="submit" aria-disabled={find.busy}>
          Find
        </button>
      </form>
      {found === null && <p role="status">No car with this id is provisioned.</p>}
      {found && (
        <ul class="cards" aria-label="Car found">
          <FleetCar
            car={found}
            {...actions}
            onChanged={async (message) => {
              setFound(undefined);
              await actions.onChanged(message);
            }}
          />
        </ul>
      )}
    </section>
  );
}

function FleetCar({ car, onRotated, onChanged, onProblem }: { car: CarSummary } & CarActions) {
  const name = carName(car.device_id);
  const [asking, setAsking] = useState<'rotate' | 'decommission'>();
  const path = { params: { path: { device_id: car.device_id } } };
  const refused = (problem: Problem) => onProblem(carProblem(problem, car.device_id));

  async function rotate() {
    setAsking(undefined);
    const rotated = await ask(api.POST('/api/v1/admin/cars/{device_id}/credential', path));
    if (!rotated.ok) return refused(rotated.problem);
    onRotated(rotated.data, `The ${name} has a new password`);
  }
  async function decommission() {
    setAsking(undefined);
    const removed = await ask(api.DELETE('/api/v1/admin/cars/{device_id}', path));
    if (!removed.ok) return refused(removed.problem);
    await onChanged(`Decommissioned the ${name}: its credential no longer signs in.`);
  }

  return (
    <li class="card">
      <h3>{carTitle(car.device_id)}</h3>
      <CarFacts car={car} owner />
      <CarLink deviceId={car.device_id} />
      <div>
        <button type="button" class="secondary" onClick={() => setAsking('rotate')}>
          <ActionWords action="Rotate credential" on={`of the ${name}`} />
        </button>
        <button type="button" class="danger" onClick={() => setAsking('decommission')}>
          <ActionWords action="Decommission" on={`the ${name}`} />
        </button>
      </div>
      {asking === 'rotate' && (
        <Confirm
          title={`A new password for the ${name}?`}
          action="Rotate credential"
          keep="Keep the password"
          onConfirm={rotate}
          onCancel={() => setAsking(undefined)}
        >
          <p>The old password stops at once, and the car is disconnected until it has the new one.</p>
        </Confirm>
      )}
      {asking === 'decommission' && (
        <Confirm
          title={`Decommission the ${name}?`}
          action="Decommission"
          keep="Keep the car"
          onConfirm={decommission}
          onCancel={() => setAsking(undefined)}
        >
          <p>
            Its credential stops at once and the car is disconnected; its reports and ownership are gone. The
            id may be provisioned again later.
          </p>
        </Confirm>
      )}
    </li>
  );
}
