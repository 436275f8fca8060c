/** Pages by path under /console, with the history API: links work, Back works, a reload stays put. */
import { useEffect, useState } from 'preact/hooks';

export const pages = {
  home: '/console',
  signIn: '/console/sign-in',
  signUp: '/console/sign-up',
  keys: '/console/keys',
  apps: '/console/apps',
  review: '/console/review',
} as const;

export type PagePath = (typeof pages)[keyof typeof pages];

const navigated = 'svc:navigated';

export function navigate(path: PagePath, options: { replace?: boolean } = {}): void {
  if (location.pathname === path) return;
  if (options.replace) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  dispatchEvent(new Event(navigated));
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
export function followLink(event: MouseEvent, path: PagePath): void {
  if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  event.preventDefault();
  navigate(path);
}
