/**
 * My cars: the cars paired with the account (every car, for an admin), each with its presence and
 * the apps it reported, a page at a time; and pairing a car with the code it shows.
 */
import type { components, Problem } from '@svc/sdk';
import { useEffect, useState } from 'preact/hooks';
import { api, ask } from '../api.ts';
import {
  CarFacts,
  CarLink,
  type CarSummary,
  CopyButton,
  carName,
  carProblem,
  carTitle,
  checkTypedDeviceId,
} from '../cars.tsx';
import { Alert, Field, Notice, PageHeading, useFocusOnRefusal, useSubmit } from '../parts.tsx';

export function MyCars({
  account,
  isAdmin,
}: {
  account: components['schemas']['Account'];
  isAdmin: boolean;
}) {
  const [cars, setCars] = useState<CarSummary[]>();
  const [nextCursor, setNextCursor] = useState<string | null>(null);
  const [problem, setProblem] = useState<Problem>();
  const [news, setNews] = useState<string>();

  async function load(cursor?: string) {
    const listed = await ask(api.GET('/api/v1/cars', { params: { query: cursor ? { cursor } : {} } }));
    if (!listed.ok) return setProblem(listed.problem);
    setCars((shown) => (cursor ? [...(shown ?? []), ...listed.data.cars] : listed.data.cars));
    setNextCursor(listed.data.next_cursor);
  }
  useEffect(() => {
    void load();
  }, []);

  async function paired(deviceId: string) {
    setNews(`Paired the ${carName(deviceId)} with your account.`);
    await load();
  }

  return (
    <main>
      <PageHeading title="My cars">My cars</PageHeading>
      <p>
        {isAdmin
          ? 'As an admin you see every car, paired with your account or not.'
          : 'The cars paired with your account.'}
      </p>
      {news && <Notice>{news}</Notice>}
      {problem && <Alert>{problem.detail}</Alert>}
      {cars?.length === 0 && <p>No cars yet: pair your first one below.</p>}
      {cars && cars.length > 0 && (
        <ul class="cards" aria-label="Your cars, newest first">
          {cars.map((car) => (
            <CarCard key={car.device_id} car={car} />
          ))}
        </ul>
      )}
      {nextCursor && (
        <button type="button" class="secondary" onClick={() => load(nextCursor)}>
          Show more cars
        </button>
      )}
      <PairCar onPaired={paired} />
      <h2>Receive a car</h2>
      <p>
        An owner hands a car over with your account id: <code>{account.id}</code>{' '}
        <CopyButton text={account.id} action="Copy account id" on="yours" />
      </p>
    </main>
  );
}

function CarCard({ car }: { car: CarSummary }) {
  return (
    <li class="card">
      <h2>{carTitle(car.device_id)}</h2>
      <CarFacts car={car} />
      <CarLink deviceId={car.device_id} />
    </li>
  );
}

/**
 * Pairing proves presence in the car: the car shows a one-time code, which is typed back here. The
 * id typed is the user's own input, so it stays as they typed it in its field.
 */
function PairCar({ onPaired }: { onPaired: (deviceId: string) => Promise<void> }) {
  const [typedId, setTypedId] = useState('');
  const [code, setCode] = useState('');
  /** The car that shows a code now, and until when. */
  const [asked, setAsked] = useState<{ deviceId: string; expiresAt: string }>();
  const [refusal, setRefusal] = useState<{ field: 'device_id' | 'code' | 'none'; message: string }>();
  const form = useFocusOnRefusal(refusal);

  const askForCode = useSubmit(async () => {
    const checked = checkTypedDeviceId(typedId);
    if ('refusal' in checked) return setRefusal({ field: 'device_id', message: checked.refusal });
    const { deviceId } = checked;
    const answer = await ask(
      api.POST('/api/v1/cars/{device_id}/pair', { params: { path: { device_id: deviceId } }, body: {} }),
    );
    if (!answer.ok) return setRefusal(pairingRefusal(answer.problem, deviceId));
    setRefusal(undefined);
    if ('owner_id' in answer.data) {
      // Already this account's car: nothing was sent.
      setTypedId('');
      return onPaired(deviceId);
    }
    setAsked({ deviceId, expiresAt: answer.data.expires_at });
  });

  const pair = useSubmit(async () => {
    if (!asked) return;
    if (code.trim() === '') return setRefusal({ field: 'code', message: 'Type the 8 digits the car shows.' });
    const answer = await ask(
      api.POST('/api/v1/cars/{device_id}/pair', {
        params: { path: { device_id: asked.deviceId } },
        body: { code: code.trim() },
      }),
    );
    if (!answer.ok) return setRefusal(pairingRefusal(answer.problem, asked.deviceId));
    setRefusal(undefined);
    setAsked(undefined);
    setTypedId('');
    setCode('');
    await onPaired(asked.deviceId);
  });

  return (
    <section aria-labelledby="pair-title">
      <h2 id="pair-title">Pair a car</h2>
      {refusal?.field === 'none' && <Alert>{refusal.message}</Alert>}
      {!asked ? (
        <form ref={form} onSubmit={askForCode.onSubmit} noValidate>
          <Field
            label="Device id"
            name="device_id"
            hint="The car's full id, its brand first: brand_a:1HGCM82633A004352. The car must be switched on."
            value={typedId}
            onInput={setTypedId}
            error={refusal?.field === 'device_id' ? refusal.message : undefined}
            autoComplete="off"
            required
          />
          <button type="submit" aria-disabled={askForCode.busy}>
            Ask the car for a code
          </button>
        </form>
      ) : (
        <form ref={form} onSubmit={pair.onSubmit} noValidate>
          <Notice>
            The {carName(asked.deviceId)} shows an 8-digit code now. Type it here before{' '}
            {new Date(asked.expiresAt).toLocaleTimeString(undefined, { timeStyle: 'short' })}.
          </Notice>
          <Field
            label="Code the car shows"
            name="code"
            value={code}
            onInput={setCode}
            error={refusal?.field === 'code' ? refusal.message : undefined}
            autoComplete="one-time-code"
            required
          />
          <div class="actions">
            <button type="submit" aria-disabled={pair.busy}>
              Pair
            </button>
            <button
              type="button"
              class="secondary"
              onClick={() => {
                setAsked(undefined);
                setRefusal(undefined);
                setCode('');
              }}
            >
              Start again
            </button>
          </div>
        </form>
      )}
    </section>
  );
}

function pairingRefusal(
  problem: Problem,
  deviceId: string,
): { field: 'device_id' | 'code' | 'none'; message: string } {
  const message = carProblem(problem, deviceId);
  if (
    ['missing_prefix', 'unknown_brand', 'invalid_native_id', 'brand_mismatch', 'car_not_found'].includes(
      problem.code,
    )
  )
    return { field: 'device_id', message };
  if (/pairing_code/.test(problem.code)) return { field: 'code', message };
  return { field: 'none', message };
}
