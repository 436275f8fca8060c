/** Sign in with email and password: a web session, for this tab only. */
import type { Problem } from '@svc/sdk';
import { useState } from 'preact/hooks';
import { api, ask, fieldErrors } from '../api.ts';
import { Alert, Field, Link, Notice, PageHeading, useFocusOnRefusal, useSubmit } from '../parts.tsx';
import { pages } from '../router.ts';
import { session } from '../session.ts';

export function SignIn({ notice, onSignedIn }: { notice: string | undefined; onSignedIn: () => void }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [problem, setProblem] = useState<Problem>();
  const form = useFocusOnRefusal(problem);
  const { busy, onSubmit } = useSubmit(async () => {
    const outcome = await ask(api.POST('/api/v1/account/sessions', { body: { email, password } }));
    if (!outcome.ok) return setProblem(outcome.problem);
    session.start(outcome.data.access_token, outcome.data.expires_at);
    onSignedIn();
  });

  const errors = problem ? fieldErrors(problem) : {};
  return (
    <main>
      <PageHeading title="Sign in">Sign in</PageHeading>
      {notice && !problem && <Notice>{notice}</Notice>}
      <form ref={form} onSubmit={onSubmit} noValidate>
        <Field
          label="Email"
          name="email"
          type="email"
          autoComplete="username"
          value={email}
          onInput={setEmail}
          error={errors.email}
          required
        />
        <Field
          label="Password"
          name="password"
          type="password"
          autoComplete="current-password"
          value={password}
          onInput={setPassword}
          error={errors.password}
          required
        />
        {problem && Object.keys(errors).length === 0 && <Alert>{problem.detail}</Alert>}
        <button type="submit" aria-disabled={busy}>
          Sign in
        </button>
      </form>
      <p>
        New here? <Link to={pages.signUp}>Create an account</Link>.
      </p>
    </main>
  );
}
