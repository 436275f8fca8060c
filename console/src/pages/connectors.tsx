/**
 * Brand connectors (admins): a maker's cloud speaking for all the cars of its brand over MQTT.
 * Make one (its password shown once), rotate its password or remove it, each of those asked first.
 */
import type { Brand, components } from '@svc/sdk';
import { useEffect, useState } from 'preact/hooks';
import { api, ask, fieldErrors } from '../api.ts';
import { BrandField, SecretOnce } from '../cars.tsx';
import { Confirm } from '../confirm.tsx';
import {
  ActionWords,
  Alert,
  Field,
  Notice,
  PageHeading,
  useFocusOnRefusal,
  useSubmit,
  When,
} from '../parts.tsx';

type Connector = components['schemas']['Connector'];
type MqttCredential = components['schemas']['MqttCredential'];

export function BrandConnectors() {
  const [connectors, setConnectors] = useState<Connector[]>();
  const [problem, setProblem] = useState<string>();
  const [news, setNews] = useState<string>();
  const [secret, setSecret] = useState<{ credential: MqttCredential; title: string }>();
  const [asking, setAsking] = useState<{ connector: Connector; step: 'rotate' | 'remove' }>();

  async function load() {
    const listed = await ask(api.GET('/api/v1/admin/connectors'));
    if (listed.ok) setConnectors(listed.data.connectors);
    else setProblem(listed.problem.detail);
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
  async function take(connector: Connector, step: 'rotate' | 'remove') {
    setAsking(undefined);
    const path = { params: { path: { brand: connector.brand, name: connector.name } } };
    if (step === 'rotate') {
      const rotated = await ask(api.POST('/api/v1/admin/connectors/{brand}/{name}/credential', path));
      if (!rotated.ok) return setProblem(rotated.problem.detail);
      return shown(rotated.data, `${connector.username} has a new password`);
    }
    const removed = await ask(api.DELETE('/api/v1/admin/connectors/{brand}/{name}', path));
    if (!removed.ok) return setProblem(removed.problem.detail);
    setNews(`Removed ${connector.username}: it no longer signs in.`);
    await load();
  }

  return (
    <main>
      <PageHeading title="Brand connectors">Brand connectors</PageHeading>
      <p>
        A connector is a maker's cloud speaking for all the cars of its brand: it may publish and subscribe
        under <code>cars/&lt;brand&gt;/</code> only.
      </p>
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
      {connectors?.length === 0 && <p>No connectors yet.</p>}
      {connectors && connectors.length > 0 && (
        <ul class="cards" aria-label="Brand connectors">
          {connectors.map((connector) => (
            <li key={connector.username} class="card">
              <h2>
                <code>{connector.username}</code>
              </h2>
              <dl>
                <dt>Brand</dt>
                <dd>{connector.brand}</dd>
                <dt>Made</dt>
                <dd>
                  <When at={connector.created_at} />
                </dd>
              </dl>
              <button
                type="button"
                class="secondary"
                onClick={() => setAsking({ connector, step: 'rotate' })}
              >
                <ActionWords action="Rotate credential" on={`of ${connector.username}`} />
              </button>
              <button type="button" class="danger" onClick={() => setAsking({ connector, step: 'remove' })}>
                <ActionWords action="Remove" on={connector.username} />
              </button>
            </li>
          ))}
        </ul>
      )}
      <NewConnector onMade={(made) => shown(made.mqtt, `${made.connector.username} is made: its password`)} />
      {asking && (
        <Confirm
          title={
            asking.step === 'rotate'
              ? `A new password for ${asking.connector.username}?`
              : `Remove ${asking.connector.username}?`
          }
          action={asking.step === 'rotate' ? 'Rotate credential' : 'Remove connector'}
          keep="Keep it"
          onConfirm={() => take(asking.connector, asking.step)}
          onCancel={() => setAsking(undefined)}
        >
          <p>
            {asking.step === 'rotate'
              ? 'The old password stops at once, and the connector is disconnected until it has the new one.'
              : 'Its password stops at once and it is disconnected: the cars it speaks for fall silent.'}
          </p>
        </Confirm>
      )}
    </main>
  );
}

function NewConnector({ onMade }: { onMade: (made: components['schemas']['CreatedConnector']) => void }) {
  const [brand, setBrand] = useState<Brand>('brand_a');
  const [name, setName] = useState('');
  const [refusal, setRefusal] = useState<string>();
  const form = useFocusOnRefusal(refusal);
  const make = useSubmit(async () => {
    if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(name.trim()))
      return setRefusal('Use lowercase letters, digits and -, up to 63 characters, e.g. fleet-eu.');
    const made = await ask(api.POST('/api/v1/admin/connectors', { body: { brand, name: name.trim() } }));
    if (!made.ok) return setRefusal(fieldErrors(made.problem).name ?? made.problem.detail);
    setRefusal(undefined);
    setName('');
    onMade(made.data);
  });
  return (
    <section aria-labelledby="new-connector">
      <h2 id="new-connector">Make a connector</h2>
      <form ref={form} onSubmit={make.onSubmit} noValidate>
        <BrandField value={brand} onChange={setBrand} />
        <Field
          label="Name"
          name="name"
          hint="Unique within its brand: lowercase letters, digits and -."
          value={name}
          onInput={setName}
          error={refusal}
          autoComplete="off"
          required
        />
        <button type="submit" aria-disabled={make.busy}>
          Make connector
        </button>
      </form>
    </section>
  );
}
