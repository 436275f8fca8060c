/**
 * The signed-in session: the access token, kept in this tab's sessionStorage only (closing the tab
 * forgets it; no other tab or site reads it), dropped on sign-out (which ends it at the service
 * too), on expiry and on any 401.
 */
const storageKey = 'svc.console.session';

interface StoredSession {
  token: string;
  expiresAt: string;
}

type SessionEnded = (message: string) => void;
const listeners = new Set<SessionEnded>();

function expired(stored: StoredSession): boolean {
  return !(Date.parse(stored.expiresAt) > Date.now());
}

function read(): StoredSession | undefined {
  try {
    const stored = JSON.parse(sessionStorage.getItem(storageKey) ?? 'null') as StoredSession | null;
    if (typeof stored?.token !== 'string' || typeof stored.expiresAt !== 'string') return undefined;
    return stored;
  } catch {
    return undefined;
  }
}

export const session = {
  /** The access token, or undefined when signed out or past its expiry. */
  token(): string | undefined {
    const stored = read();
    if (!stored || expired(stored)) return undefined;
    return stored.token;
  },

  /** Whether a session was started in this tab and has run out (kept until `end` says so). */
  hasExpired(): boolean {
    const stored = read();
    return stored !== undefined && expired(stored);
  },

  start(token: string, expiresAt: string): void {
    sessionStorage.setItem(storageKey, JSON.stringify({ token, expiresAt } satisfies StoredSession));
  },

  signOut(): void {
    sessionStorage.removeItem(storageKey);
  },

  /** The service refused the token, or it ran out: forget it, and tell the page to ask for a sign-in. */
  end(message: string): void {
    if (!read()) return;
    sessionStorage.removeItem(storageKey);
    for (const listener of listeners) listener(message);
  },

  onEnded(listener: SessionEnded): () => void {
    listeners.add(listener);
    return () => listeners.delete(listener);
  },
};
