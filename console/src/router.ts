/** Pages by path under /console, with the history API: links work, Back works, a reload stays put. */
import { useEffect, useState } from 'preact/hooks';

export const pages = {
  home: '/console',
  signIn: '/console/sign-in',
  signUp: '/console/sign-up',
  keys: '/console/keys',
  apps: '/console/apps',
  review: '/console/review',
  cars: '/console/cars',
  /** One car: which one is in the history entry's state, never in the address (a device id is masked on screen). */
  car: '/console/car',
  fleet: '/console/fleet',
  connectors: '/console/connectors',
  /** One app's rollout: which app is in the history entry's state, as a car page's car is. */
  rollout: '/console/rollout',
  webhooks: '/console/webhooks',
} as const;

export type PagePath = (typeof pages)[keyof typeof pages];

const navigated = 'svc:navigated';

/** What a page is about beyond its path (the car a car page shows), kept in its history entry. */
export interface PageState {
  deviceId?: string;
  appId?: string;
}

export function navigate(path: PagePath, options: { replace?: boolean; state?: PageState } = {}): void {
  const state = options.state ?? null;
  if (location.pathname === path && JSON.stringify(history.state) === JSON.stringify(state)) return;
  if (options.replace) history.replaceState(state, '', path);
  else history.pushState(state, '', path);
  dispatchEvent(new Event(navigated));
}

/** The history entry's state: kept by Back, Forward and a reload, and lost in a new tab. */
export function usePageState(): PageState {
  const [state, setState] = useState<PageState>(() => history.state ?? {});
  useEffect(() => {
    const update = () => setState(history.state ?? {});
    addEventListener('popstate', update);
    addEventListener(navigated, update);
    return () => {
      removeEventListener('popstate', update);
      removeEventListener(navigated, update);
    };
  }, []);
  return state;
}

/** The page's path, or undefined for one the console does not have. */
export function currentPage(): PagePath | undefined {
  const path = location.pathname.replace(/\/+$/, '');
  return (Object.values(pages) as string[]).includes(path) ? (path as PagePath) : undefined;
}

export function usePage(): PagePath | undefined {
  const [page, setPage] = useState(currentPage);
  useEffect(() => {
    const update = () => setPage(currentPage());
    addEventListener('popstate', update);
    addEventListener(navigated, update);
    return () => {
      removeEventListener('popstate', update);
      removeEventListener(navigated, update);
    };
  }, []);
  return page;
}

/** A link to a page that changes it in place, as a plain link would with a new load. */
export function followLink(event: MouseEvent, path: PagePath, state?: PageState): void {
  if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  event.preventDefault();
  navigate(path, state ? { state } : {});
}
