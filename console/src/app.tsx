/** The console's frame: who is signed in, the pages they may open, and sign-out. */
import type { components } from '@svc/sdk';
import { useEffect, useState } from 'preact/hooks';
import { api, ask, sessionEndedMessage } from './api.ts';
import { MyMiniApps } from './pages/apps.tsx';
import { CarPage } from './pages/car.tsx';
import { BrandConnectors } from './pages/connectors.tsx';
import { Fleet } from './pages/fleet.tsx';
import { SshKeys } from './pages/keys.tsx';
import { MyCars } from './pages/my-cars.tsx';
import { ReviewQueuePage } from './pages/review.tsx';
import { RolloutPage } from './pages/rollout.tsx';
import { SignIn } from './pages/sign-in.tsx';
import { SignUp } from './pages/sign-up.tsx';
import { Webhooks } from './pages/webhooks.tsx';
import { Alert, Link, PageHeading } from './parts.tsx';
import { currentPage, followLink, navigate, type PagePath, pages, usePage, usePageState } from './router.ts';
import { session } from './session.ts';
import { DisabledByServiceNotice, useWebhooksDisabledByService } from './webhooks.tsx';

type Account = components['schemas']['Account'];

const signedOutPages: PagePath[] = [pages.signIn, pages.signUp];

/** What a signed-in page is called, for "sign in to open …". */
const pageNames: Partial<Record<PagePath, string>> = {
  [pages.keys]: 'SSH keys',
  [pages.apps]: 'My mini-apps',
  [pages.review]: 'the review queue',
  [pages.cars]: 'My cars',
  [pages.car]: 'a car',
  [pages.rollout]: 'a rollout',
  [pages.fleet]: 'the fleet',
  [pages.connectors]: 'brand connectors',
  [pages.webhooks]: 'webhooks',
};

/** Admin pages, and what the one who is not an admin is told there. */
const adminPages: Partial<Record<PagePath, { title: string; why: string }>> = {
  [pages.review]: {
    title: 'Review queue',
    why: 'Only admins review mini-apps.',
  },
  [pages.fleet]: { title: 'Fleet', why: 'Only admins provision cars.' },
  [pages.connectors]: { title: 'Brand connectors', why: 'Only admins make brand connectors.' },
};

export function App() {
  const page = usePage();
  const { deviceId, appId } = usePageState();
  const [account, setAccount] = useState<Account>();
  const [notice, setNotice] = useState<string>();
  const [problem, setProblem] = useState<string>();
  /** The page a signed-out visitor asked for, opened once they have signed in. */
  const [returnTo, setReturnTo] = useState<PagePath>();
  const signedIn = session.token() !== undefined;
  const disabledWebhooks = useWebhooksDisabledByService(signedIn, page);

  useEffect(
    () =>
      session.onEnded((message) => {
        setAccount(undefined);
        setNotice(message);
        const here = currentPage();
        if (here && pageNames[here]) setReturnTo(here);
        navigate(pages.signIn);
      }),
    [],
  );

  // Who is signed in (and whether an admin), once a session exists.
  useEffect(() => {
    if (!signedIn || account) return;
    void ask(api.GET('/api/v1/dev/me')).then((me) => {
      if (me.ok) setAccount(me.data.account);
      else if (me.problem.status !== 401) setProblem(me.problem.detail);
    });
  }, [signedIn, account]);

  // /console, or a page for the other side of signing in, goes to where the user can start; a
  // signed-in page asked for while signed out opens after the sign-in.
  const wanted = page && page !== pages.home && signedIn !== signedOutPages.includes(page) ? page : undefined;
  useEffect(() => {
    if (wanted || !page) return;
    if (!signedIn && pageNames[page]) {
      setReturnTo(page);
      setNotice(`Sign in to open ${pageNames[page]}.`);
    }
    navigate(signedIn ? pages.keys : pages.signIn, { replace: true });
  }, [page, wanted, signedIn]);

  // A session that ran out while the tab was open ends when the user next moves (after
  // the redirect above, so that its message is the one shown).
  useEffect(() => {
    if (session.hasExpired()) session.end(sessionEndedMessage);
  }, [page]);

  function signedInNow() {
    setNotice(undefined);
    setAccount(undefined);
    setReturnTo(undefined);
    navigate(returnTo ?? pages.keys);
  }

  async function signOut() {
    // The service ends the token first (it needs the token to know which); the tab forgets it
    // whatever the answer, so that a service out of reach cannot keep anyone signed in here.
    await ask(api.DELETE('/api/v1/account/sessions/current'));
    session.signOut();
    setAccount(undefined);
    setNotice('You are signed out.');
    navigate(pages.signIn);
  }

  const isAdmin = account?.roles.includes('admin') ?? false;
  return (
    <>
      <a class="skip-link" href="#content">
        Skip to content
      </a>
      <header class="top">
        <p class="brand">svc console</p>
        {signedIn && (
          <nav aria-label="Console">
            <ul>
              <li>
                <NavLink to={pages.keys} current={page}>
                  SSH keys
                </NavLink>
              </li>
              <li>
                <NavLink to={pages.apps} current={page}>
                  My mini-apps
                </NavLink>
              </li>
              <li>
                <NavLink to={pages.cars} current={page}>
                  My cars
                </NavLink>
              </li>
              <li>
                <NavLink to={pages.webhooks} current={page}>
                  Webhooks
                </NavLink>
              </li>
              {isAdmin && (
                <li>
                  <NavLink to={pages.review} current={page}>
                    Review queue
                  </NavLink>
                </li>
              )}
              {isAdmin && (
                <li>
                  <NavLink to={pages.fleet} current={page}>
                    Fleet
                  </NavLink>
                </li>
              )}
              {isAdmin && (
                <li>
                  <NavLink to={pages.connectors} current={page}>
                    Brand connectors
                  </NavLink>
                </li>
              )}
            </ul>
          </nav>
        )}
        {signedIn && (
          <div class="who">
            {account && <span>{account.email}</span>}
            <button type="button" class="secondary" onClick={signOut}>
              Sign out
            </button>
          </div>
        )}
      </header>
      <div id="content">
        {problem && <Alert>{problem}</Alert>}
        {/* Wherever the owner goes (the Webhooks page says it itself, with the endpoint). */}
        {signedIn && wanted !== pages.webhooks && <DisabledByServiceNotice webhooks={disabledWebhooks} />}
        {wanted === pages.signIn && <SignIn notice={notice} onSignedIn={signedInNow} />}
        {wanted === pages.signUp && <SignUp onSignedIn={signedInNow} />}
        {wanted === pages.keys && <SshKeys />}
        {wanted === pages.apps && <MyMiniApps />}
        {wanted === pages.cars && account && <MyCars account={account} isAdmin={isAdmin} />}
        {wanted === pages.car && <CarPage deviceId={deviceId} />}
        {wanted === pages.rollout && <RolloutPage appId={appId} />}
        {wanted === pages.webhooks && <Webhooks />}
        {wanted && adminPages[wanted] && account && !isAdmin && <NotAnAdmin page={wanted} />}
        {isAdmin && wanted === pages.review && <ReviewQueuePage />}
        {isAdmin && wanted === pages.fleet && <Fleet />}
        {isAdmin && wanted === pages.connectors && <BrandConnectors />}
        {page === undefined && <PageNotFound signedIn={signedIn} />}
      </div>
    </>
  );
}

function NavLink({
  to,
  current,
  children,
}: {
  to: PagePath;
  current: PagePath | undefined;
  children: string;
}) {
  return (
    <a
      href={to}
      aria-current={to === current ? 'page' : undefined}
      onClick={(event) => followLink(event, to)}
    >
      {children}
    </a>
  );
}

function PageNotFound({ signedIn }: { signedIn: boolean }) {
  return (
    <main>
      <PageHeading title="Page not found">Page not found</PageHeading>
      <p>
        The console has no page at <code>{location.pathname}</code>.{' '}
        {signedIn ? (
          <Link to={pages.keys}>Go to SSH keys</Link>
        ) : (
          <Link to={pages.signIn}>Go to sign in</Link>
        )}
        .
      </p>
    </main>
  );
}

function NotAnAdmin({ page }: { page: PagePath }) {
  const { title, why } = adminPages[page] ?? { title: 'Admins only', why: 'Only admins open this page.' };
  return (
    <main>
      <PageHeading title={title}>{title}</PageHeading>
      <p>{why} The service's operator names them (see docs/getting-started.md, "Admins").</p>
    </main>
  );
}
