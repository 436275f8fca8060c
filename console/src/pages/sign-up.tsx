/** Sign up with name, email and password; the service's refusals are shown at the field they name. */
import type { Problem } from '@svc/sdk';
import { useState } from 'preact/hooks';
import { api, ask, fieldErrors } from '../api.ts';
import { Alert, Field, Link, PageHeading, useFocusOnRefusal, useSubmit } from '../parts.tsx';
import { pages } from '../router.ts';
import { session } from '../session.ts';

/** Refusals that are about one field though the service sends no field list with them. */
const fieldOfCode: Record<string, string> = { email_taken: 'email' };

export function SignUp({ onSignedIn }: { onSignedIn: () => void }) {
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [problem, setProblem] = useState<Problem>();
  const form = useFocusOnRefusal(problem);
  const { busy, onSubmit } = useSubmit(async () => {
    const created = await ask(api.POST('/api/v1/account/signup', { body: { name, email, password } }));
    if (!created.ok) return setProblem(created.problem);
    // The account exists; signing it in is the next thing anyone does.
    const signedIn = await ask(api.POST('/api/v1/account/sessions', { body: { email, password } }));
    if (!signedIn.ok) return setProblem(signedIn.problem);
    session.start(signedIn.data.access_token, signedIn.data.expires_at);
    onSignedIn();
  });

  const errors = problem ? fieldErrors(problem) : {};
  const field = problem && fieldOfCode[problem.code];
  if (problem && field) errors[field] = problem.detail;
  const shownAtFields = Object.keys(errors).length > 0;

  return (
    <main>
      <PageHeading title="Sign up">Create an account</PageHeading>
      <form ref={form} onSubmit={onSubmit} noValidate>
        <Field
          label="Name"
          name="name"
          autoComplete="name"
          value={name}
          onInput={setName}
          error={errors.name}
          required
        />
        <Field
          label="Email"
          name="email"
          type="email"
          autoComplete="email"
          value={email}
          onInput={setEmail}
          error={errors.email}
          required
        />
        <Field
          label="Password"
          name="password"
          type="password"
          autoComplete="new-password"
          hint="12 characters or more."
          value={password}
          onInput={setPassword}
          error={errors.password}
          required
        />
        {problem && !shownAtFields && <Alert>{problem.detail}</Alert>}
        <button type="submit" aria-disabled={busy}>
          Sign up
        </button>
      </form>
      <p>
        Have an account? <Link to={pages.signIn}>Sign in</Link>.
      </p>
    </main>
  );
}
