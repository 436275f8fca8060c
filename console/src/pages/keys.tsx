/**
 * Account → SSH keys: the keys that sign in to `svc`, with their fingerprints as `ssh-keygen -lf`
 * prints them; paste the first one here, remove one with a confirmation.
 */
import type { components, Problem } from '@svc/sdk';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ask, fieldErrors } from '../api.ts';
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

type SshKey = components['schemas']['SshKey'];

/**
 * A private key must never leave the machine: it is refused here, before any request. The service
 * refuses one too, but by then it would have crossed the network.
 */
const privateKeyMarker = /PRIVATE KEY|PuTTY-User-Key-File/;
const privateKeyMessage =
  'This is a private key: never paste it anywhere, and keep it secret. Paste the public key instead: the one line in the file that ends in .pub (for example ~/.ssh/id_ed25519.pub).';

export function SshKeys() {
  const [keys, setKeys] = useState<SshKey[]>();
  const [loadProblem, setLoadProblem] = useState<Problem>();
  const [publicKey, setPublicKey] = useState('');
  const [title, setTitle] = useState('');
  /** Why the pasted key, or its title, was refused: shown at that field. */
  const [refusal, setRefusal] = useState<{ field: 'public_key' | 'title'; message: string }>();
  const [news, setNews] = useState<string>();
  const [removing, setRemoving] = useState<SshKey>();

  async function load() {
    const listed = await ask(api.GET('/api/v1/dev/keys'));
    if (listed.ok) setKeys(listed.data.keys);
    else setLoadProblem(listed.problem);
  }
  useEffect(() => {
    void load();
  }, []);

  const form = useFocusOnRefusal(refusal);

  const { busy, onSubmit: addKey } = useSubmit(async () => {
    setNews(undefined);
    if (privateKeyMarker.test(publicKey))
      return setRefusal({ field: 'public_key', message: privateKeyMessage });
    if (publicKey.trim() === '')
      return setRefusal({
        field: 'public_key',
        message: 'Paste a public key: the contents of your .pub file.',
      });
    const body = title.trim()
      ? { public_key: publicKey.trim(), title: title.trim() }
      : { public_key: publicKey.trim() };
    const added = await ask(api.POST('/api/v1/dev/keys', { body }));
    if (!added.ok) return setRefusal(keyRefusal(added.problem));
    setRefusal(undefined);
    setPublicKey('');
    setTitle('');
    await load();
    setNews(`Added “${added.data.title}”, ${added.data.fingerprint}.`);
  });

  async function removeKey(key: SshKey) {
    setRemoving(undefined);
    const removed = await ask(
      api.DELETE('/api/v1/dev/keys/{key_id}', { params: { path: { key_id: key.id } } }),
    );
    if (!removed.ok) return setLoadProblem(removed.problem);
    await load();
    setNews(`Removed “${key.title}”, ${key.fingerprint}: it no longer signs in.`);
  }

  return (
    <main>
      <PageHeading title="SSH keys">SSH keys</PageHeading>
      <p>
        <code>svc</code> signs in with an ed25519 SSH key. Add the public key here, then sign in from a
        terminal.
      </p>
      {news && <Notice>{news}</Notice>}
      {loadProblem && <Alert>{loadProblem.detail}</Alert>}
      {keys && <KeyList keys={keys} onRemove={setRemoving} />}
      <h2>Add a key</h2>
      <form ref={form} onSubmit={addKey} noValidate>
        <Field
          label="Public key"
          name="public_key"
          multiline
          hint="The one line of your .pub file, e.g. the output of: cat ~/.ssh/id_ed25519.pub"
          value={publicKey}
          onInput={setPublicKey}
          error={refusal?.field === 'public_key' ? refusal.message : undefined}
          required
        />
        <Field
          label="Title (optional)"
          name="title"
          value={title}
          onInput={setTitle}
          hint="By default, the key's comment."
          error={refusal?.field === 'title' ? refusal.message : undefined}
        />
        <button type="submit" aria-disabled={busy}>
          Add key
        </button>
      </form>
      <NextStep hasKeys={(keys?.length ?? 0) > 0} />
      {removing && (
        <ConfirmRemoval sshKey={removing} onConfirm={removeKey} onCancel={() => setRemoving(undefined)} />
      )}
    </main>
  );
}

/** The service's refusal of a pasted key or its title, at the field it is about, with what to do. */
function keyRefusal(problem: Problem): { field: 'public_key' | 'title'; message: string } {
  const { title } = fieldErrors(problem);
  if (title) return { field: 'title', message: title };
  if (problem.code === 'unsupported_key_type')
    return { field: 'public_key', message: sentence(problem.detail) };
  if (problem.code === 'malformed_key') {
    return {
      field: 'public_key',
      message: `This does not read as an SSH public key (${problem.detail}). Paste the one line of your .pub file: it starts with ssh-ed25519 AAAA.`,
    };
  }
  return { field: 'public_key', message: fieldErrors(problem).public_key ?? problem.detail };
}

function sentence(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1) + (text.endsWith('.') ? '' : '.');
}

function KeyList({ keys, onRemove }: { keys: SshKey[]; onRemove: (key: SshKey) => void }) {
  if (keys.length === 0) return <p>No keys yet: add your first one below.</p>;
  return (
    <>
      <h2 id="your-keys">Your SSH keys</h2>
      <ul class="cards" aria-labelledby="your-keys">
        {keys.map((key) => (
          <li key={key.id} class="card">
            <h3>{key.title}</h3>
            <dl>
              <dt>Fingerprint</dt>
              <dd>
                <code>{key.fingerprint}</code>
              </dd>
              <dt>Added</dt>
              <dd>
                <When at={key.created_at} />
              </dd>
              <dt>Last used</dt>
              <dd>
                <When at={key.last_used_at} />
              </dd>
            </dl>
            <button type="button" class="secondary" onClick={() => onRemove(key)}>
              <ActionWords action="Remove" on={key.title} />
            </button>
          </li>
        ))}
      </ul>
    </>
  );
}

function NextStep({ hasKeys }: { hasKeys: boolean }) {
  const command = `SVC_API_URL=${location.origin} svc login`;
  return (
    <section aria-labelledby="next-step" class="next-step">
      <h2 id="next-step">{hasKeys ? 'Next: sign in with svc' : 'Then: sign in with svc'}</h2>
      <p>In a terminal, on the machine that holds the private key:</p>
      <pre>
        <code>{command}</code>
      </pre>
      <p>
        It signs in with <code>~/.ssh/id_ed25519</code>; <code>--key &lt;path&gt;</code> names another key.{' '}
        <code>svc whoami</code> then shows the key's fingerprint, as listed here. In a checkout of the svc
        repository, run it as <code>npx svc login</code> (docs/cli.md in it says how to install{' '}
        <code>svc</code> elsewhere).
      </p>
    </section>
  );
}

/** A modal question: Escape or "Keep it" cancels; focus returns to where it was. */
function ConfirmRemoval({
  sshKey,
  onConfirm,
  onCancel,
}: {
  sshKey: SshKey;
  onConfirm: (key: SshKey) => void;
  onCancel: () => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const keep = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    const opener = document.activeElement as HTMLElement | null;
    dialog.current?.showModal();
    // The safe answer has the focus: Enter pressed twice must not remove a key.
    keep.current?.focus();
    return () => opener?.focus();
  }, []);
  return (
    <dialog ref={dialog} aria-labelledby="remove-title" onCancel={onCancel} class="confirm">
      <h2 id="remove-title">Remove “{sshKey.title}”?</h2>
      <p>
        <code>{sshKey.fingerprint}</code> will no longer sign in, and the <code>svc</code> sessions it signed
        in end now.
      </p>
      <div class="actions">
        <button type="button" class="danger" onClick={() => onConfirm(sshKey)}>
          Remove key
        </button>
        <button ref={keep} type="button" class="secondary" onClick={onCancel}>
          Keep it
        </button>
      </div>
    </dialog>
  );
}
